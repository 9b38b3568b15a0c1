"""A knowledge base's rows as portable values, read out of one backend and written into another.

What ``calypso export`` and ``calypso import`` move (``services/portable.py`` packs them into an archive).
Every table of the schema is either carried (``TABLES``, in the order an import writes them: what a row
refers to comes before it) or named in ``NOT_CARRIED`` with the reason; every column of a carried table is
either carried (``Table.columns``) or named in its ``dropped``. A test compares both with the schemas of
SQLite and PostgreSQL, so a table or column added later cannot be left out silently.

Rows are dicts of portable values: JSON values (a JSON column is parsed, a PostgreSQL array is a list, a
flag is a bool), a document's original bytes (``content``) and a passage vector (``vector``, float32).
Integer keys stay behind: a row refers to a document by its id (``document``), to a passage by its
document and index (``chunk_index``), to a conversation by its id (``conversation``); the target gives
new keys in the same order, so what ranks by key ranks alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Parent = Literal["document", "conversation"] | None

_LEASE = "a lease of the process working on it: the target's workers take the job afresh"
_KEY = "the row's integer key: the target gives its own, in the same order"


@dataclass(frozen=True)
class Table:
    """A carried table: its archived columns (names as in the archive), how they are typed, what it refers to."""

    name: str
    columns: tuple[str, ...]
    parent: Parent = None  # rows belong to a document (``document`` column) or a conversation
    namespaced: bool = True  # carried by an export of one namespace (else workspace-wide only)
    json: frozenset[str] = frozenset()  # JSON columns: text in SQLite, json/jsonb in PostgreSQL
    lists: frozenset[str] = frozenset()  # lists of text: JSON text in SQLite, text[] in PostgreSQL
    flags: frozenset[str] = frozenset()  # booleans: 0/1 in SQLite
    dropped: Mapping[str, str] = field(default_factory=dict)  # schema columns not carried, and why


TABLES: tuple[Table, ...] = (
    Table("workspace_policies", ("workspace", "sources_policy"), namespaced=False),
    Table(
        "api_keys",
        ("id", "workspace", "name", "key_hash", "prefix", "created_at", "revoked_at"),
        namespaced=False,
    ),
    Table(
        "bots", ("workspace", "id", "config", "created_at", "updated_at"), namespaced=False, json=frozenset({"config"})
    ),
    Table(
        "documents",
        (
            "id",
            "file_id",
            "workspace",
            "namespace",
            "filename",
            "media_type",
            "bytes",
            "sha256",
            "created_at",
            "page_count",
            "chunk_count",
            "title",
            "source_url",
            "metadata",
            "status",
            "last_error",
            "chunk_max_tokens",
            "chunk_overlap_tokens",
            "purpose",
            "expires_at",
        ),  # fmt: skip
        json=frozenset({"metadata", "last_error"}),
        dropped={"key": _KEY, "content": "the original bytes: a file of their own in the archive"},
    ),
    Table(
        "pages",
        ("document", "number", "label", "start", "end", "layout"),
        parent="document",
        json=frozenset({"layout"}),
        dropped={"document_key": "the document's id instead"},
    ),
    Table(
        "chunks",
        (
            "document",
            "chunk_index",
            "text",
            "start",
            "end",
            "page_start",
            "page_end",
            "page_labels",
            "heading_path",
            "terms",
            "modality",
            "sections",
            "confidence",
            "table_header",
        ),  # fmt: skip
        parent="document",
        json=frozenset({"sections"}),
        lists=frozenset({"page_labels", "heading_path"}),
        dropped={"key": _KEY, "document_key": "the document's id instead"},
    ),
    Table(
        "chunk_embeddings",
        ("document", "chunk_index", "model", "dimension", "vector"),
        parent="document",
        dropped={"chunk_key": "the passage's document id and index instead", "document_key": "the document's id"},
    ),
    Table(
        "ingest_jobs",
        ("document", "attempts", "pages_parsed", "passages_written", "created_at", "updated_at"),
        parent="document",
        dropped={"document_key": "the document's id", "lease_owner": _LEASE, "lease_expires_at": _LEASE},
    ),
    Table(
        "embedding_jobs",
        ("document", "model", "attempts", "created_at"),
        parent="document",
        dropped={"document_key": "the document's id", "lease_owner": _LEASE, "lease_expires_at": _LEASE},
    ),
    Table(
        "vector_stores",
        (
            "id",
            "workspace",
            "namespace",
            "name",
            "created_at",
            "last_active_at",
            "metadata",
            "expires_after",
            "description",
        ),  # fmt: skip
        dropped={"key": _KEY},
    ),
    Table(
        "vector_store_files",
        ("document", "file_id", "vector_store_id", "attributes", "created_at"),
        parent="document",
        dropped={"document_key": "the document's id"},
    ),
    Table(
        "vector_store_file_batches",
        ("id", "workspace", "vector_store_id", "file_ids", "created_at", "cancelled"),
        flags=frozenset({"cancelled"}),
    ),
    Table(
        "conversations",
        ("id", "workspace", "bot_id", "created_at", "metadata"),
        namespaced=False,
        json=frozenset({"metadata"}),
        dropped={"key": _KEY, "turn_owner": _LEASE, "turn_until": _LEASE},
    ),
    Table(
        "conversation_messages",
        ("conversation", "id", "role", "content", "citations", "extra", "created_at"),
        parent="conversation",
        namespaced=False,
        json=frozenset({"citations", "extra"}),
        dropped={"key": _KEY, "conversation_key": "the conversation's id instead"},
    ),
    Table(
        "responses",
        ("id", "workspace", "bot_id", "created_at", "previous_response_id", "body", "history"),
        namespaced=False,
        json=frozenset({"body", "history"}),
    ),
)

NOT_CARRIED: Mapping[str, str] = {
    "migrations": "the schema's history: the target keeps its own",
    "document_changes": "the change feed: an import records its own changes, so the target's indexes follow",
    "document_contents": "PostgreSQL's place for a document's bytes: carried with the document",
    # Not carried yet (issue 46): a source's secret is sealed with this server's signing key, and its items point
    # at documents by key. The documents a source brought are carried; on the target no source keeps them in sync.
    "sources": "synced sources: not exported yet; add them again on the target",
    "source_items": "a source's items and their versions: not exported yet, with their source",
}

TABLE = {table.name: table for table in TABLES}


@dataclass(frozen=True)
class Scope:
    """What an export covers: everything, one workspace, or one namespace of a workspace."""

    workspace: str | None = None
    namespace: str | None = None

    def carries(self, table: Table) -> bool:
        return self.namespace is None or table.namespaced


@dataclass
class LoadCounts:
    """Rows an import wrote, and rows it left because the target had them already, per table."""

    added: dict[str, int] = field(default_factory=dict)
    present: dict[str, int] = field(default_factory=dict)
    vectors_dropped: int = 0  # made by another model than the target's: re-embedded instead
    queued: int = 0  # documents queued for the target's model


class ExportReader(Protocol):
    """One consistent state of the database, read table by table (``PortableStore.reading``)."""

    def rows(self, table: str) -> Iterator[dict[str, Any]]:
        """The table's rows in the scope, in key order; a document's row carries its ``content`` bytes."""
        ...

    def schema(self) -> dict[str, set[str]]:
        """Every table of this database and its columns."""
        ...


class PortableStore(Protocol):
    """Rows out (a consistent snapshot) and in (one transaction), for export and import."""

    def reading(self, scope: Scope) -> Any:
        """A context manager giving an ``ExportReader`` on one snapshot, held until the block ends."""
        ...

    def load(
        self, tables: Iterable[tuple[str, Iterable[dict[str, Any]]]], model: tuple[str, int] | None, needs: int = 0
    ) -> LoadCounts:
        """Write the rows, table by table in ``TABLES`` order, in one transaction: all of them or none.

        Rows the target has already (same id) are left as they are, with what belongs to them, so a second
        import changes nothing; a row whose id the target gives to something else raises ``Conflict``.
        ``model``: the target's embedding model (name, dimension); vectors of another are dropped and their
        documents queued for it (None: vectors kept as they are). ``needs``: bytes the import may add.
        """
        ...
