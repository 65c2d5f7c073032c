"""Where each page of the site lives, relative to the site's root folder: the one URL scheme
of the site, of the Dagster assets' links to it (``defs/site_links.py``) and of the tests.

    index.html                                         every contract, its newest verdict
    usage.html                                         usage and cost per target
    contracts/<contract>/index.html                    versions, history, comparisons
    contracts/<contract>/versions/<target>.html        one version: verdict, why, calibration
    contracts/<contract>/versions/<target>/cases-<n>.html   its cases, page n (1, 2, ...)
    contracts/<contract>/compare/<candidate>/<baseline>.html   two versions side by side
    contracts/<contract>/production/index.html         every production day
    contracts/<contract>/production/<day>.html         one production day
    files/<contract>/<target>/<name>                   copies of the HTML report and diff

Contract keys (``[A-Za-z0-9_]``), targets (``[A-Za-z0-9._@-]``, always with an ``@``) and
days (``YYYY-MM-DD``) are safe file names as they are; in a URL every part is
percent-encoded all the same (``@`` kept).
"""

from __future__ import annotations

from urllib.parse import quote

INDEX = "index.html"
USAGE = "usage.html"
CSS = "static/site.css"
JS = "static/site.js"


def contract_page(contract: str) -> str:
    return f"contracts/{contract}/index.html"


def version_page(contract: str, target: str) -> str:
    return f"contracts/{contract}/versions/{target}.html"


def cases_page(contract: str, target: str, page: int = 1) -> str:
    return f"contracts/{contract}/versions/{target}/cases-{page}.html"


def compare_page(contract: str, candidate: str, baseline: str) -> str:
    return f"contracts/{contract}/compare/{candidate}/{baseline}.html"


def production_page(contract: str) -> str:
    return f"contracts/{contract}/production/index.html"


def day_page(contract: str, day: str) -> str:
    return f"contracts/{contract}/production/{day}.html"


def file_copy(contract: str, target: str, name: str) -> str:
    return f"files/{contract}/{target}/{name}"


def relative(page: str, target: str) -> str:
    """The link from ``page`` to ``target`` (both site paths), percent-encoded."""
    depth = page.count("/")
    return "../" * depth + url_path(target)


def url_path(path: str) -> str:
    """A site path as the path part of a URL."""
    return "/".join(quote(part, safe="@") for part in path.split("/"))


def absolute(base: str, path: str) -> str:
    """The URL of a site path under the site's base URL (``http://localhost:3002``)."""
    return base.rstrip("/") + "/" + url_path(path)
