"""The proxies the environment sets for HTTP backends (``HTTPS_PROXY``, ``NO_PROXY``, ~/.netrc):
which proxy a URL goes through, and their passwords registered as secrets, since both HTTP
clients send them."""

from __future__ import annotations

from typing import Any

from decguard_pipeline.core.secrets import register_secret


def env_proxy(url: str) -> tuple[Any, Any]:
    """The proxy (and its credentials) the environment assigns to ``url``, or (None, None)."""
    from aiohttp.helpers import get_env_proxy_for_url
    from yarl import URL

    try:
        proxy, auth = get_env_proxy_for_url(URL(url))
    except LookupError:
        return None, None
    if auth is not None:  # also from ~/.netrc, which only aiohttp reads
        register_secret(auth.password)
    return proxy, auth


def register_proxy_passwords() -> None:
    """Register the passwords in the proxy URLs the environment sets (``HTTPS_PROXY=
    http://user:password@proxy:3128``, as both HTTP clients read them) as secrets: they are
    credentials this process sends, whichever backend's request goes through the proxy."""
    from urllib.parse import urlsplit
    from urllib.request import getproxies

    for url in getproxies().values():
        try:
            password = urlsplit(url).password
        except ValueError:  # not a URL the clients could use either
            continue
        register_secret(password)
