"""Names and scopes every layer shares: workspaces, namespaces, what a question may search."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from calypso.errors import InvalidNamespace
from calypso.models import RankingOptions

DEFAULT_WORKSPACE = "default"
# Passages one question or search may ask for (OpenAI's file_search caps max_num_results at 50).
MAX_PASSAGES = 50
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# For JSON schemas: ECMA's "$" ends the text (no multiline), as ``fullmatch`` does here.
NAME_SCHEMA: dict[str, Any] = {"pattern": _NAME.pattern}


def check_namespace(namespace: object, param: str = "namespace") -> str:
    """The namespace (or workspace) name, or InvalidNamespace naming ``param``."""
    if not isinstance(namespace, str) or not _NAME.fullmatch(namespace):
        raise InvalidNamespace(
            f"Invalid namespace {namespace!r}: use 1-64 letters, digits, '_', '-' or '.', starting with a letter or digit.",
            param=param,
        )
    return namespace


@dataclass(frozen=True)
class RetrievalScope:
    """What one question is answered from.

    No namespaces means no knowledge base: no retrieval, citations null (seed 004).
    """

    namespaces: tuple[str, ...] = ()
    document_ids: tuple[str, ...] | None = None  # None: every document of the namespaces
    passage_count: int | None = None  # None: the configured CALYPSO_PASSAGE_COUNT
    ranking: RankingOptions | None = None  # a file_search tool's ranking_options

    @property
    def knowledge_base(self) -> bool:
        return bool(self.namespaces)
