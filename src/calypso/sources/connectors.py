"""Which connector reads which type of source, with the server's bounds they all share."""

from __future__ import annotations

from typing import Any

from calypso.sources.model import Connector, ConnectorOptions


def build_connector(
    kind: str, settings: dict[str, Any], secrets: dict[str, str], options: ConnectorOptions
) -> Connector:
    """The connector of a stored source (its settings checked when it was added, ``sources/settings.py``)."""
    if kind == "folder":
        from calypso.sources.folder import FolderConnector

        return FolderConnector(settings, options)
    if kind == "website":
        from calypso.sources.website import WebsiteConnector

        return WebsiteConnector(settings, options)
    if kind == "git":
        from calypso.sources.git import GitConnector

        return GitConnector(settings, options)
    if kind == "imap":
        from calypso.sources.imap import ImapConnector

        return ImapConnector(settings, secrets, options)
    raise ValueError(f"no connector for source type {kind!r}")
