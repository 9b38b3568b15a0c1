"""The playground: a web page over the public API (static HTML, CSS and JS modules; no build step, no CDN).

The assets live in ``static/`` inside the package, so a wheel install serves them;
``calypso.api.routes.playground`` serves the page at ``/`` and ``/playground``.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable

STATIC_PACKAGE = "calypso.playground"
STATIC_DIR = "static"


def static_files() -> Traversable:
    """The directory of the page's assets."""
    return resources.files(STATIC_PACKAGE) / STATIC_DIR


def index_html() -> bytes:
    return (static_files() / "index.html").read_bytes()
