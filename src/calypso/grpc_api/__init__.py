"""xAI's gRPC API over Calypso's services: the official ``xai-sdk`` client talks to Calypso unchanged.

The messages and services are the ones the ``xai-sdk`` package ships
(``xai_sdk.proto``: chat, collections, documents, files), so the wire format is
xAI's own. Each servicer is a thin translator, like the HTTP routes: protobuf
in, calls on ``Services``, protobuf out; it never calls the HTTP API.

grpcio and xai-sdk come with the ``xai`` extra; without them ``calypso serve``
runs HTTP only and says so (``missing_dependency``). Nothing here imports grpc
at module level, so importing this package is always safe.
"""

from __future__ import annotations

import importlib.util


def missing_dependency() -> str | None:
    """None when the gRPC listener can run; else the one-line notice ``calypso serve`` prints."""
    missing = [name for name in ("grpc", "xai_sdk") if importlib.util.find_spec(name) is None]
    if not missing:
        return None
    return (
        f"gRPC listener off: {' and '.join(missing)} not installed "
        "(pip install 'calypso[xai]' for the xAI gRPC API; HTTP is unaffected)."
    )


__all__ = ["missing_dependency"]
