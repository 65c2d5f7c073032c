"""``${NAME}`` and ``${NAME:-default}`` in a setting, replaced from the environment.

The URL settings of the language-model providers (``base_url``, ``url``, ``health_url``) take
them, so that one contract names a server whose address differs between machines (a vLLM
host in a cluster, the demo server on whichever port it got) without the contract, its hash
or its targets changing. The value is expanded when the settings load; the contract keeps
the placeholder. Only these two forms are recognised; any other ``$`` is literal text.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

# ${NAME} or ${NAME:-default}; the default runs to the first "}"
PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def placeholder_names(text: str) -> list[str]:
    """The variables ``text`` refers to, in order of appearance."""
    return [m.group(1) for m in PLACEHOLDER.finditer(text)]


def expand(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with every placeholder replaced by its variable's value (an empty value counts
    as unset, as in the shell's ``:-``), else its default; ValueError naming the variable when
    it is unset and has no default."""
    env = os.environ if environ is None else environ

    def value(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        found = env.get(name)
        if found:
            return found
        if default is None:
            raise ValueError(
                f"environment variable {name} is not set (write ${{{name}:-<default>}} "
                "to give a default)"
            )
        return default

    return PLACEHOLDER.sub(value, text)
