"""What a connector gives the sync: items found, items fetched, and how an item can fail or be gone."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

MAX_REPORTED_ERRORS = 20  # errors kept on a sync's report; the count of failures is always whole


@dataclass(frozen=True)
class Known:
    """What the source brought before for one external id: its version and its connector's state."""

    version: str
    state: dict[str, Any]


@dataclass
class Fetched:
    """An item's bytes as the document should hold them, and its new version and state."""

    data: bytes
    filename: str
    version: str
    media_type: str | None = None
    source_url: str | None = None  # a web page or a file at a commit: the link a citation shows
    state: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NotModified:
    """The origin says the item is as it was (an HTTP 304); ``state`` replaces the kept state."""

    state: dict[str, Any]


class Gone(Exception):
    """The origin says the item no longer exists (an HTTP 404 or 410): its document is removed."""


class ItemFailed(Exception):
    """One item could not be read (refused, too large, timed out): reported; its document stays as it was."""


Load = Callable[[Known | None], "Fetched | NotModified"]


@dataclass
class Found:
    """One item the source holds now. ``version``: when known without fetching (an mtime, a blob id, a sitemap's
    lastmod), an unchanged item is not fetched at all. ``pending``: seen but not ready (a file being written):
    kept as it was this time."""

    external_id: str
    version: str | None
    load: Load
    pending: bool = False


@dataclass
class Scan:
    """A connector's findings. ``complete`` is False when the listing itself was cut short (a sitemap that
    failed, a folder that could not be read): then nothing unseen is removed. ``errors`` are the listing's
    own problems (bounds reached, parts skipped), reported on the source."""

    complete: bool = True
    errors: list[dict[str, str]] = field(default_factory=list)

    def error(self, item: str, message: str) -> None:
        if len(self.errors) < MAX_REPORTED_ERRORS:
            self.errors.append({"item": item[:300], "message": message[:500]})


class Connector(Protocol):
    """A source type's reader: ``scan`` yields what the source holds now; it may fill ``scan`` as it goes."""

    def scan(self, known: dict[str, Known], scan: Scan) -> Iterator[Found]: ...


@dataclass(frozen=True)
class ConnectorOptions:
    """The server's settings a connector obeys: the SSRF guard's switch, the fetch timeout, the upload limit
    (an item larger is skipped and reported) and a directory of its own (a git clone)."""

    allow_private: bool
    timeout: float
    max_bytes: int
    cache_dir: Path
