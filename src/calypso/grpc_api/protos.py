"""xAI's generated messages and service stubs, loaded without the ``xai_sdk`` client package around them.

``xai_sdk/__init__.py`` imports the SDK's clients (aiohttp, requests, OpenTelemetry, psutil): 14.7 MB of
anonymous memory and 3 MB of libraries in every API process, which serves these messages and never calls
those clients (the messages alone are 2 MB). The generated modules live in ``xai_sdk.proto`` and import
each other relatively, so while the SDK is not imported yet they load under a bare stand-in for the
package, and every module loaded under it leaves ``sys.modules`` again at once: a later ``import xai_sdk``
(a test, a script in the same process) runs the real package whole. Its generated modules run again and
get the very same message classes from protobuf's default pool (the classes, not the module objects, are
what is shared: ``tests/grpc/test_protos.py``).
"""

from __future__ import annotations

import importlib.util
import sys
import types


def _stand_in() -> types.ModuleType | None:
    """A package object for ``xai_sdk`` that has its path and nothing else, put in ``sys.modules``."""
    if "xai_sdk" in sys.modules:
        return None
    spec = importlib.util.find_spec("xai_sdk")
    if spec is None or not spec.submodule_search_locations:
        return None  # not installed: the import below says so
    package = types.ModuleType("xai_sdk")
    package.__path__ = list(spec.submodule_search_locations)
    sys.modules["xai_sdk"] = package
    return package


_package = _stand_in()
try:
    from xai_sdk.proto import (
        chat_pb2,
        chat_pb2_grpc,
        collections_pb2,
        collections_pb2_grpc,
        documents_pb2,
        documents_pb2_grpc,
        files_pb2,
        files_pb2_grpc,
        sample_pb2,
        shared_pb2,
        usage_pb2,
    )
finally:
    if _package is not None:
        for _name in [name for name in sys.modules if name == "xai_sdk" or name.startswith("xai_sdk.")]:
            del sys.modules[_name]

__all__ = [
    "chat_pb2",
    "chat_pb2_grpc",
    "collections_pb2",
    "collections_pb2_grpc",
    "documents_pb2",
    "documents_pb2_grpc",
    "files_pb2",
    "files_pb2_grpc",
    "sample_pb2",
    "shared_pb2",
    "usage_pb2",
]
