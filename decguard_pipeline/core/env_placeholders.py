"""``${NAME}`` and ``${NAME:-default}`` in a setting, replaced from the environment, for the
variables the setting's owner declares and no others.

The URL settings of the language-model providers (``base_url``, ``url``, ``health_url``) take
them, so that one contract names a server whose address differs between machines (a vLLM
host in a cluster, the demo server on whichever port it got) without the contract, its hash
or its targets changing. A backend lists the variables its URLs may read in ``url_env``; a
placeholder naming any other variable is a contract error, so a contract cannot send (and
then store in a report) ``${AWS_SECRET_ACCESS_KEY}`` or any other value of the environment it
runs in. The value of a declared variable is registered as a secret when it is read, and is
redacted like a key wherever it would be written. The value is expanded when the settings
load; the contract keeps the placeholder. Only these two forms are recognised; any other
``$`` is literal text. DecGuard expands no placeholders at all (its providers take none).
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Mapping

from decguard_pipeline.core.secrets import register_secret

# ${NAME} or ${NAME:-default}; the default runs to the first "}"
PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
DECLARATION = "url_env"  # the setting that lists the variables a backend's URLs may read


def placeholder_names(text: str) -> list[str]:
    """The variables ``text`` refers to, in order of appearance."""
    return [m.group(1) for m in PLACEHOLDER.finditer(text)]


def undeclared(text: str, declared: Collection[str]) -> list[str]:
    """The variables ``text`` refers to that ``declared`` does not list."""
    return [name for name in placeholder_names(text) if name not in declared]


def expand(text: str, declared: Collection[str], environ: Mapping[str, str] | None = None) -> str:
    """``text`` with every placeholder replaced by its variable's value (an empty value counts
    as unset, as in the shell's ``:-``), else its default. ValueError naming the variable when
    ``declared`` does not list it, or when it is unset and has no default. Every value read is
    registered as a secret (``core.secrets``)."""
    env = os.environ if environ is None else environ
    missing = undeclared(text, declared)
    if missing:
        name = missing[0]
        raise ValueError(
            f"${{{name}}} is not declared in {DECLARATION}: only the environment variables "
            f"listed there expand (their values are then redacted like keys)"
        )

    def value(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        found = env.get(name)
        if found:
            register_secret(found)
            return found
        if default is None:
            raise ValueError(
                f"environment variable {name} is not set (write ${{{name}:-<default>}} "
                "to give a default)"
            )
        return default

    return PLACEHOLDER.sub(value, text)
