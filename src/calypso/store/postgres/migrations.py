"""PostgreSQL schema migrations: named, ordered functions recorded in a table.

Safe when several processes start at once: each migration runs in its own
transaction that first takes a transaction-level advisory lock
(``pg_advisory_xact_lock``, scoped to this database) and re-reads the table,
so exactly one process applies it and the others find it recorded. A failed
migration rolls back whole (PostgreSQL's DDL is transactional), nothing
recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import errors, sql

from calypso.errors import StorageError
from calypso.store.migrations import apply, recorded
from calypso.store.sources import POSTGRES_TABLES

Connection = psycopg.Connection[tuple[Any, ...]]
Migration = Callable[[Connection], None]

# Any constant will do, as long as every Calypso process uses the same one: b"calypso\0" as a bigint.
MIGRATION_LOCK = int.from_bytes(b"calypso\0", "big", signed=True)


def require_extension(db: Connection, name: str) -> None:
    """Create an extension the schema needs, or fail saying which one and how to get it."""
    if db.execute("SELECT 1 FROM pg_available_extensions WHERE name = %s", (name,)).fetchone() is None:
        raise StorageError(
            f"This PostgreSQL server has no {name!r} extension, which Calypso needs (pgvector for '{name}'); "
            "install it on the database server (e.g. the postgresql-16-pgvector package, or the pgvector Docker "
            "image) and start again."
        )
    try:
        db.execute(sql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(sql.Identifier(name)))
    except errors.InsufficientPrivilege as exc:
        raise StorageError(
            f"Calypso's database user may not create the {name!r} extension; have a superuser run "
            f'CREATE EXTENSION "{name}"; in this database once, then start again.'
        ) from exc


def m001_vector_extension(db: Connection) -> None:
    require_extension(db, "vector")


def m002_documents(db: Connection) -> None:
    # Keys are identities: a sequence never hands a value out twice, even after deletes or rollbacks,
    # so another process's in-memory index can never map an old key to someone else's new chunk.
    db.execute(
        """
        CREATE TABLE documents (
            key BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            file_id TEXT NOT NULL UNIQUE,
            workspace TEXT NOT NULL,
            namespace TEXT NOT NULL,
            filename TEXT NOT NULL,
            media_type TEXT NOT NULL,
            bytes BIGINT NOT NULL,
            sha256 TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            page_count INTEGER NOT NULL,
            chunk_count INTEGER NOT NULL,
            title TEXT,
            source_url TEXT,
            metadata JSON NOT NULL DEFAULT '{}'
        );
        CREATE UNIQUE INDEX documents_one_copy_per_namespace ON documents (workspace, namespace, sha256);
        CREATE INDEX documents_by_namespace ON documents (workspace, namespace, key);
        CREATE INDEX documents_by_workspace ON documents (workspace, key);
        CREATE TABLE document_contents (
            document_key BIGINT PRIMARY KEY REFERENCES documents (key) ON DELETE CASCADE,
            content BYTEA NOT NULL
        );
        CREATE TABLE pages (
            document_key BIGINT NOT NULL REFERENCES documents (key) ON DELETE CASCADE,
            number INTEGER NOT NULL,
            label TEXT NOT NULL,
            start INTEGER NOT NULL,
            "end" INTEGER NOT NULL,
            PRIMARY KEY (document_key, number)
        );
        CREATE TABLE chunks (
            key BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            document_key BIGINT NOT NULL REFERENCES documents (key) ON DELETE CASCADE,
            chunk_index INTEGER NOT NULL,
            text TEXT NOT NULL,
            start INTEGER NOT NULL,
            "end" INTEGER NOT NULL,
            page_start INTEGER NOT NULL,
            page_end INTEGER NOT NULL,
            page_labels TEXT[] NOT NULL,
            heading_path TEXT[] NOT NULL,
            terms TEXT,
            UNIQUE (document_key, chunk_index)
        )
        """
    )


def m003_responses(db: Connection) -> None:
    db.execute(
        """
        CREATE TABLE responses (
            id TEXT PRIMARY KEY,
            workspace TEXT NOT NULL,
            bot_id TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            previous_response_id TEXT,
            body JSON NOT NULL,
            history JSON NOT NULL
        )
        """
    )


def m004_conversations(db: Connection) -> None:
    db.execute(
        """
        CREATE TABLE conversations (
            key BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            workspace TEXT NOT NULL,
            bot_id TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            metadata JSON NOT NULL DEFAULT '{}'
        );
        CREATE INDEX conversations_by_workspace ON conversations (workspace, key);
        CREATE TABLE conversation_messages (
            key BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            conversation_key BIGINT NOT NULL REFERENCES conversations (key) ON DELETE CASCADE,
            role TEXT NOT NULL,
            content TEXT,
            citations JSON,
            extra JSON NOT NULL DEFAULT '{}',
            created_at BIGINT NOT NULL
        );
        CREATE INDEX conversation_messages_in_order ON conversation_messages (conversation_key, key)
        """
    )


def m005_keys_bots_and_policies(db: Connection) -> None:
    db.execute(
        """
        CREATE TABLE api_keys (
            id TEXT PRIMARY KEY,
            workspace TEXT NOT NULL,
            name TEXT NOT NULL DEFAULT '',
            key_hash TEXT NOT NULL UNIQUE,
            prefix TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            revoked_at BIGINT
        );
        CREATE INDEX api_keys_by_workspace ON api_keys (workspace, created_at);
        CREATE TABLE bots (
            workspace TEXT NOT NULL,
            id TEXT NOT NULL,
            config JSON NOT NULL,
            created_at BIGINT NOT NULL,
            updated_at BIGINT NOT NULL,
            PRIMARY KEY (workspace, id)
        );
        CREATE TABLE workspace_policies (workspace TEXT PRIMARY KEY, sources_policy TEXT NOT NULL)
        """
    )


def m006_document_changes(db: Connection) -> None:
    # The change feed (DocumentStore.changes_since); writers serialise on FEED_LOCK so seq order is commit order.
    db.execute(
        """
        CREATE TABLE document_changes (
            seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            workspace TEXT NOT NULL,
            namespace TEXT NOT NULL,
            document_key BIGINT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('added', 'deleted')),
            at BIGINT NOT NULL
        )
        """
    )


def m007_ingestion_jobs(db: Connection) -> None:
    """Documents get a status (existing ones are completed) and an ingestion job table, one job per document.

    The job's bytes are the document's own ``document_contents`` row; a lease (owner, expiry in epoch
    seconds of the database's clock, so workers on other hosts agree) says who works on it.
    """
    db.execute(
        """
        ALTER TABLE documents ADD COLUMN status TEXT NOT NULL DEFAULT 'completed'
            CHECK (status IN ('in_progress', 'completed', 'failed', 'cancelled'));
        ALTER TABLE documents ADD COLUMN last_error JSON;
        CREATE TABLE ingest_jobs (
            document_key BIGINT PRIMARY KEY REFERENCES documents (key) ON DELETE CASCADE,
            attempts INTEGER NOT NULL DEFAULT 0,
            lease_owner TEXT,
            lease_expires_at DOUBLE PRECISION,
            pages_parsed INTEGER NOT NULL DEFAULT 0,
            passages_written INTEGER NOT NULL DEFAULT 0,
            created_at BIGINT NOT NULL,
            updated_at BIGINT NOT NULL
        )
        """
    )


def m008_vector_stores(db: Connection) -> None:
    """Vector stores (a named namespace of a workspace) and the file link of a document: the file id the
    client attached and its attributes (JSON text, as on SQLite); the link goes with its document. File
    batches record the file ids one request attached."""
    db.execute(
        """
        CREATE TABLE vector_stores (
            key BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id TEXT NOT NULL,
            workspace TEXT NOT NULL,
            namespace TEXT NOT NULL,
            name TEXT,
            created_at BIGINT NOT NULL,
            last_active_at BIGINT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}',
            expires_after TEXT,
            UNIQUE (workspace, id)
        );
        CREATE TABLE vector_store_files (
            document_key BIGINT PRIMARY KEY REFERENCES documents (key) ON DELETE CASCADE,
            vector_store_id TEXT NOT NULL,
            file_id TEXT NOT NULL,
            attributes TEXT NOT NULL DEFAULT '{}',
            created_at BIGINT NOT NULL
        );
        CREATE INDEX vector_store_files_by_file ON vector_store_files (file_id);
        CREATE TABLE vector_store_file_batches (
            id TEXT PRIMARY KEY,
            workspace TEXT NOT NULL,
            vector_store_id TEXT NOT NULL,
            file_ids TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            cancelled BOOLEAN NOT NULL DEFAULT FALSE
        )
        """
    )


def m009_embeddings(db: Connection) -> None:
    """Passage vectors as pgvector ``vector`` values keyed by the model that made them, the queue of
    documents whose passages still need embedding, and the ``embedded`` change kind."""
    db.execute(
        """
        CREATE TABLE chunk_embeddings (
            chunk_key BIGINT PRIMARY KEY REFERENCES chunks (key) ON DELETE CASCADE,
            document_key BIGINT NOT NULL REFERENCES documents (key) ON DELETE CASCADE,
            model TEXT NOT NULL,
            dimension INTEGER NOT NULL,
            vector vector NOT NULL
        );
        CREATE INDEX chunk_embeddings_by_document ON chunk_embeddings (document_key, model);
        CREATE TABLE embedding_jobs (
            document_key BIGINT PRIMARY KEY REFERENCES documents (key) ON DELETE CASCADE,
            model TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            lease_owner TEXT,
            lease_expires_at DOUBLE PRECISION,
            created_at BIGINT NOT NULL
        );
        ALTER TABLE document_changes DROP CONSTRAINT IF EXISTS document_changes_kind_check;
        ALTER TABLE document_changes ADD CONSTRAINT document_changes_kind_check
            CHECK (kind IN ('added', 'deleted', 'embedded'))
        """
    )


def m010_static_chunking_and_file_links(db: Connection) -> None:
    """A document's static chunking (tokens; NULL: the server's own chunking), a store's description, and
    file links keyed by (document, file id): one document may be several files of its store (files with
    identical bytes share it), each with its own attributes."""
    db.execute(
        """
        ALTER TABLE documents ADD COLUMN chunk_max_tokens INTEGER;
        ALTER TABLE documents ADD COLUMN chunk_overlap_tokens INTEGER;
        ALTER TABLE vector_stores ADD COLUMN description TEXT;
        ALTER TABLE vector_store_files DROP CONSTRAINT vector_store_files_pkey;
        ALTER TABLE vector_store_files ADD PRIMARY KEY (document_key, file_id)
        """
    )


def m011_page_layout_and_passage_sections(db: Connection) -> None:
    """A page's modality, OCR confidence and word boxes (NULL for extracted text); a passage's modality
    and where each heading path inside it begins (NULL when it lies in one section)."""
    db.execute(
        """
        ALTER TABLE pages ADD COLUMN layout JSONB;
        ALTER TABLE chunks ADD COLUMN modality TEXT NOT NULL DEFAULT 'text';
        ALTER TABLE chunks ADD COLUMN sections JSONB
        """
    )


def m012_file_purpose(db: Connection) -> None:
    """The Files API purpose a file was uploaded with (NULL: "assistants", all files before this)."""
    db.execute("ALTER TABLE documents ADD COLUMN purpose TEXT")


def m013_file_expiry(db: Connection) -> None:
    """When a file uploaded with the Files API's expires_after expires (NULL: never), and an index to sweep by."""
    db.execute("ALTER TABLE documents ADD COLUMN expires_at BIGINT")
    db.execute("CREATE INDEX documents_expires_at ON documents (expires_at) WHERE expires_at IS NOT NULL")


def m014_conversation_turn_lease(db: Connection) -> None:
    """Who is answering a turn of the conversation, until when: turns are taken one at a time across processes."""
    db.execute("ALTER TABLE conversations ADD COLUMN turn_owner TEXT, ADD COLUMN turn_until TIMESTAMPTZ")


def m015_passage_confidence_and_table_header(db: Connection) -> None:
    """An OCR'd passage's recognition confidence, and the header of the table it begins inside (NULL: none,
    or stored before this)."""
    db.execute("ALTER TABLE chunks ADD COLUMN confidence REAL, ADD COLUMN table_header TEXT")


def m016_sources(db: Connection) -> None:
    """Synced sources and the items each brought (``store/sources.py``)."""
    for statement in POSTGRES_TABLES.split(";"):
        if statement.strip():
            db.execute(statement)


MIGRATIONS: list[tuple[str, Migration]] = [
    ("001_vector_extension", m001_vector_extension),
    ("002_documents", m002_documents),
    ("003_responses", m003_responses),
    ("004_conversations", m004_conversations),
    ("005_keys_bots_and_policies", m005_keys_bots_and_policies),
    ("006_document_changes", m006_document_changes),
    ("007_ingestion_jobs", m007_ingestion_jobs),
    ("008_vector_stores", m008_vector_stores),
    ("009_embeddings", m009_embeddings),
    ("010_static_chunking_and_file_links", m010_static_chunking_and_file_links),
    ("011_page_layout_and_passage_sections", m011_page_layout_and_passage_sections),
    ("012_file_purpose", m012_file_purpose),
    ("013_file_expiry", m013_file_expiry),
    ("014_conversation_turn_lease", m014_conversation_turn_lease),
    ("015_passage_confidence_and_table_header", m015_passage_confidence_and_table_header),
    ("016_sources", m016_sources),
]


@contextmanager
def _locked(db: Connection) -> Iterator[None]:
    with db.transaction():
        db.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        yield


def migrate(db: Connection) -> list[str]:
    """Apply every migration not yet recorded, each once however many processes race; return the names applied."""
    with _locked(db):
        # Under the lock: two concurrent CREATE TABLE IF NOT EXISTS can still collide in the catalog.
        db.execute("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)")
        done = recorded(db)
    return apply(db, MIGRATIONS, done, lambda: _locked(db), "%s")
