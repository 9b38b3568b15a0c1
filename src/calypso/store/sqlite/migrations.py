"""SQLite schema migrations: named, ordered functions recorded in a table (applied by ``store.migrations``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from calypso.store.migrations import apply, recorded
from calypso.store.sources import SQLITE_TABLES

Migration = Callable[[sqlite3.Connection], None]


def _run(db: sqlite3.Connection, script: str) -> None:
    # Not executescript(): it commits first, which would break the migration's transaction.
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)


def m001_documents(db: sqlite3.Connection) -> None:
    _run(
        db,
        """
        CREATE TABLE documents (
            key INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            file_id TEXT NOT NULL UNIQUE,
            workspace TEXT NOT NULL,
            namespace TEXT NOT NULL,
            filename TEXT NOT NULL,
            media_type TEXT NOT NULL,
            bytes INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            page_count INTEGER NOT NULL,
            chunk_count INTEGER NOT NULL,
            title TEXT,
            source_url TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            content BLOB NOT NULL
        );
        CREATE INDEX documents_by_namespace ON documents (workspace, namespace, created_at, key);
        CREATE INDEX documents_by_hash ON documents (workspace, namespace, sha256);
        CREATE TABLE pages (
            document_key INTEGER NOT NULL REFERENCES documents(key) ON DELETE CASCADE,
            number INTEGER NOT NULL,
            label TEXT NOT NULL,
            start INTEGER NOT NULL,
            "end" INTEGER NOT NULL,
            PRIMARY KEY (document_key, number)
        );
        CREATE TABLE chunks (
            key INTEGER PRIMARY KEY,
            document_key INTEGER NOT NULL REFERENCES documents(key) ON DELETE CASCADE,
            chunk_index INTEGER NOT NULL,
            text TEXT NOT NULL,
            start INTEGER NOT NULL,
            "end" INTEGER NOT NULL,
            page_start INTEGER NOT NULL,
            page_end INTEGER NOT NULL,
            page_labels TEXT NOT NULL,
            heading_path TEXT NOT NULL,
            UNIQUE (document_key, chunk_index)
        );
        """,
    )


def m002_responses(db: sqlite3.Connection) -> None:
    _run(
        db,
        """
        CREATE TABLE responses (
            id TEXT PRIMARY KEY,
            workspace TEXT NOT NULL,
            bot_id TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            previous_response_id TEXT,
            body TEXT NOT NULL,
            history TEXT NOT NULL
        )
        """,
    )


def m003_conversations(db: sqlite3.Connection) -> None:
    _run(
        db,
        """
        CREATE TABLE conversations (
            key INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            workspace TEXT NOT NULL,
            bot_id TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX conversations_by_workspace ON conversations (workspace, key);
        CREATE TABLE conversation_messages (
            key INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            conversation_key INTEGER NOT NULL REFERENCES conversations(key) ON DELETE CASCADE,
            role TEXT NOT NULL,
            content TEXT,
            citations TEXT,
            extra TEXT NOT NULL DEFAULT '{}',
            created_at INTEGER NOT NULL
        );
        CREATE INDEX conversation_messages_in_order ON conversation_messages (conversation_key, key)
        """,
    )


def m004_keys_and_bots(db: sqlite3.Connection) -> None:
    _run(
        db,
        """
        CREATE TABLE api_keys (
            id TEXT PRIMARY KEY,
            workspace TEXT NOT NULL,
            name TEXT NOT NULL DEFAULT '',
            key_hash TEXT NOT NULL UNIQUE,
            prefix TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            revoked_at INTEGER
        );
        CREATE INDEX api_keys_by_workspace ON api_keys (workspace, created_at);
        CREATE TABLE bots (
            workspace TEXT NOT NULL,
            id TEXT NOT NULL,
            config TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            PRIMARY KEY (workspace, id)
        )
        """,
    )


def m005_workspace_policies(db: sqlite3.Connection) -> None:
    _run(db, "CREATE TABLE workspace_policies (workspace TEXT PRIMARY KEY, sources_policy TEXT NOT NULL)")


def m006_chunk_terms(db: sqlite3.Connection) -> None:
    # Analyzed terms ("<analyzer version> term term …"), so indexes load without re-tokenising.
    db.execute("ALTER TABLE chunks ADD COLUMN terms TEXT")


def m007_keys_never_reused_and_one_copy_per_namespace(db: sqlite3.Connection) -> None:
    """AUTOINCREMENT on document and chunk keys, and one document per (workspace, namespace, bytes).

    A freed rowid was handed out again, so another process's in-memory index
    could map an old key to someone else's new chunk. Rebuilding is the only
    way to add AUTOINCREMENT in SQLite (foreign keys are off while migrating).
    Duplicates an earlier race stored keep their rows, their hash tagged with
    their key so the unique index holds.
    """
    _run(
        db,
        """
        UPDATE documents SET sha256 = sha256 || '#' || key
            WHERE key NOT IN (SELECT MIN(key) FROM documents GROUP BY workspace, namespace, sha256);
        CREATE TABLE documents_new (
            key INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            file_id TEXT NOT NULL UNIQUE,
            workspace TEXT NOT NULL,
            namespace TEXT NOT NULL,
            filename TEXT NOT NULL,
            media_type TEXT NOT NULL,
            bytes INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            page_count INTEGER NOT NULL,
            chunk_count INTEGER NOT NULL,
            title TEXT,
            source_url TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            content BLOB NOT NULL
        );
        INSERT INTO documents_new SELECT key, id, file_id, workspace, namespace, filename, media_type, bytes, sha256,
            created_at, page_count, chunk_count, title, source_url, metadata, content FROM documents;
        DROP TABLE documents;
        ALTER TABLE documents_new RENAME TO documents;
        CREATE INDEX documents_by_namespace ON documents (workspace, namespace, created_at, key);
        CREATE UNIQUE INDEX documents_by_hash ON documents (workspace, namespace, sha256);
        CREATE TABLE chunks_new (
            key INTEGER PRIMARY KEY AUTOINCREMENT,
            document_key INTEGER NOT NULL REFERENCES documents(key) ON DELETE CASCADE,
            chunk_index INTEGER NOT NULL,
            text TEXT NOT NULL,
            start INTEGER NOT NULL,
            "end" INTEGER NOT NULL,
            page_start INTEGER NOT NULL,
            page_end INTEGER NOT NULL,
            page_labels TEXT NOT NULL,
            heading_path TEXT NOT NULL,
            terms TEXT,
            UNIQUE (document_key, chunk_index)
        );
        INSERT INTO chunks_new SELECT key, document_key, chunk_index, text, start, "end", page_start, page_end,
            page_labels, heading_path, terms FROM chunks;
        DROP TABLE chunks;
        ALTER TABLE chunks_new RENAME TO chunks
        """,
    )


def m008_document_changes(db: sqlite3.Connection) -> None:
    # The change feed (DocumentStore.changes_since): AUTOINCREMENT, so a seq is never handed out twice.
    _run(
        db,
        """
        CREATE TABLE document_changes (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            workspace TEXT NOT NULL,
            namespace TEXT NOT NULL,
            document_key INTEGER NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('added', 'deleted')),
            at INTEGER NOT NULL
        )
        """,
    )


def m009_ingestion_jobs(db: sqlite3.Connection) -> None:
    """Documents get a status (existing ones are completed) and an ingestion job table, one job per document.

    The job's bytes are the document's own ``content``; a lease (owner, expiry in epoch seconds) says who
    works on it, so a job whose worker died is claimed again once the lease expires.
    """
    _run(
        db,
        """
        ALTER TABLE documents ADD COLUMN status TEXT NOT NULL DEFAULT 'completed'
            CHECK (status IN ('in_progress', 'completed', 'failed', 'cancelled'));
        ALTER TABLE documents ADD COLUMN last_error TEXT;
        CREATE TABLE ingest_jobs (
            document_key INTEGER PRIMARY KEY REFERENCES documents(key) ON DELETE CASCADE,
            attempts INTEGER NOT NULL DEFAULT 0,
            lease_owner TEXT,
            lease_expires_at REAL,
            pages_parsed INTEGER NOT NULL DEFAULT 0,
            passages_written INTEGER NOT NULL DEFAULT 0,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL
        )
        """,
    )


def m010_vector_stores(db: sqlite3.Connection) -> None:
    """Vector stores (a named namespace of a workspace) and the file link of a document: the file id the
    client attached and its attributes; the link goes with its document. File batches record the file ids
    one request attached."""
    _run(
        db,
        """
        CREATE TABLE vector_stores (
            key INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL,
            workspace TEXT NOT NULL,
            namespace TEXT NOT NULL,
            name TEXT,
            created_at INTEGER NOT NULL,
            last_active_at INTEGER NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}',
            expires_after TEXT,
            UNIQUE (workspace, id)
        );
        CREATE TABLE vector_store_files (
            document_key INTEGER PRIMARY KEY REFERENCES documents(key) ON DELETE CASCADE,
            vector_store_id TEXT NOT NULL,
            file_id TEXT NOT NULL,
            attributes TEXT NOT NULL DEFAULT '{}',
            created_at INTEGER NOT NULL
        );
        CREATE INDEX vector_store_files_by_file ON vector_store_files (file_id);
        CREATE TABLE vector_store_file_batches (
            id TEXT PRIMARY KEY,
            workspace TEXT NOT NULL,
            vector_store_id TEXT NOT NULL,
            file_ids TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            cancelled INTEGER NOT NULL DEFAULT 0
        )
        """,
    )


def m011_embeddings(db: sqlite3.Connection) -> None:
    """Passage vectors (float32 blobs, keyed by the model that made them), the queue of documents whose
    passages still need embedding, and the ``embedded`` change kind that tells indexes to load vectors."""
    _run(
        db,
        """
        CREATE TABLE chunk_embeddings (
            chunk_key INTEGER PRIMARY KEY REFERENCES chunks(key) ON DELETE CASCADE,
            document_key INTEGER NOT NULL REFERENCES documents(key) ON DELETE CASCADE,
            model TEXT NOT NULL,
            dimension INTEGER NOT NULL,
            vector BLOB NOT NULL
        );
        CREATE INDEX chunk_embeddings_by_document ON chunk_embeddings (document_key, model);
        CREATE TABLE embedding_jobs (
            document_key INTEGER PRIMARY KEY REFERENCES documents(key) ON DELETE CASCADE,
            model TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            lease_owner TEXT,
            lease_expires_at REAL,
            created_at INTEGER NOT NULL
        );
        CREATE TABLE document_changes_new (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            workspace TEXT NOT NULL,
            namespace TEXT NOT NULL,
            document_key INTEGER NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('added', 'deleted', 'embedded')),
            at INTEGER NOT NULL
        );
        INSERT INTO document_changes_new (seq, workspace, namespace, document_key, kind, at)
            SELECT seq, workspace, namespace, document_key, kind, at FROM document_changes;
        DROP TABLE document_changes;
        ALTER TABLE document_changes_new RENAME TO document_changes
        """,
    )


def m012_static_chunking_and_file_links(db: sqlite3.Connection) -> None:
    """A document's static chunking (tokens; NULL: the server's own chunking), a store's description, and
    file links keyed by (document, file id): one document may be several files of its store (files with
    identical bytes share it), each with its own attributes."""
    _run(
        db,
        """
        ALTER TABLE documents ADD COLUMN chunk_max_tokens INTEGER;
        ALTER TABLE documents ADD COLUMN chunk_overlap_tokens INTEGER;
        ALTER TABLE vector_stores ADD COLUMN description TEXT;
        CREATE TABLE vector_store_files_new (
            document_key INTEGER NOT NULL REFERENCES documents(key) ON DELETE CASCADE,
            file_id TEXT NOT NULL,
            vector_store_id TEXT NOT NULL,
            attributes TEXT NOT NULL DEFAULT '{}',
            created_at INTEGER NOT NULL,
            PRIMARY KEY (document_key, file_id)
        );
        INSERT INTO vector_store_files_new (document_key, file_id, vector_store_id, attributes, created_at)
            SELECT document_key, file_id, vector_store_id, attributes, created_at FROM vector_store_files;
        DROP TABLE vector_store_files;
        ALTER TABLE vector_store_files_new RENAME TO vector_store_files;
        CREATE INDEX vector_store_files_by_file ON vector_store_files (file_id);
        CREATE INDEX documents_by_namespace_key ON documents (workspace, namespace, key)
        """,
    )


def m013_page_layout_and_passage_sections(db: sqlite3.Connection) -> None:
    """A page's modality, OCR confidence and word boxes (JSON, NULL for extracted text); a passage's modality
    and where each heading path inside it begins (JSON, NULL when it lies in one section)."""
    _run(
        db,
        """
        ALTER TABLE pages ADD COLUMN layout TEXT;
        ALTER TABLE chunks ADD COLUMN modality TEXT NOT NULL DEFAULT 'text';
        ALTER TABLE chunks ADD COLUMN sections TEXT
        """,
    )


def m014_file_purpose(db: sqlite3.Connection) -> None:
    """The Files API purpose a file was uploaded with (NULL: "assistants", all files before this)."""
    db.execute("ALTER TABLE documents ADD COLUMN purpose TEXT")


def m015_file_expiry(db: sqlite3.Connection) -> None:
    """When a file uploaded with the Files API's expires_after expires (NULL: never), and an index to sweep by."""
    db.execute("ALTER TABLE documents ADD COLUMN expires_at INTEGER")
    db.execute("CREATE INDEX documents_expires_at ON documents (expires_at) WHERE expires_at IS NOT NULL")


def m016_passage_confidence_and_table_header(db: sqlite3.Connection) -> None:
    """An OCR'd passage's recognition confidence, and the header of the table it begins inside (NULL: none,
    or stored before this)."""
    _run(db, "ALTER TABLE chunks ADD COLUMN confidence REAL; ALTER TABLE chunks ADD COLUMN table_header TEXT")


def m017_sources(db: sqlite3.Connection) -> None:
    """Synced sources and the items each brought (``store/sources.py``)."""
    _run(db, SQLITE_TABLES)


MIGRATIONS: list[tuple[str, Migration]] = [
    ("001_documents", m001_documents),
    ("002_responses", m002_responses),
    ("003_conversations", m003_conversations),
    ("004_keys_and_bots", m004_keys_and_bots),
    ("005_workspace_policies", m005_workspace_policies),
    ("006_chunk_terms", m006_chunk_terms),
    ("007_keys_never_reused_and_one_copy_per_namespace", m007_keys_never_reused_and_one_copy_per_namespace),
    ("008_document_changes", m008_document_changes),
    ("009_ingestion_jobs", m009_ingestion_jobs),
    ("010_vector_stores", m010_vector_stores),
    ("011_embeddings", m011_embeddings),
    ("012_static_chunking_and_file_links", m012_static_chunking_and_file_links),
    ("013_page_layout_and_passage_sections", m013_page_layout_and_passage_sections),
    ("014_file_purpose", m014_file_purpose),
    ("015_file_expiry", m015_file_expiry),
    ("016_passage_confidence_and_table_header", m016_passage_confidence_and_table_header),
    ("017_sources", m017_sources),
]


@contextmanager
def _immediate(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _references_whole(db: sqlite3.Connection, name: str) -> None:
    broken = db.execute("PRAGMA foreign_key_check").fetchall()
    if broken:
        raise sqlite3.IntegrityError(f"migration {name} broke {len(broken)} foreign key reference(s)")


def migrate(db: sqlite3.Connection) -> list[str]:
    """Apply every migration not yet recorded; return the names applied."""
    db.execute("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)")
    done = recorded(db)
    # Table rebuilds must not cascade deletes; the check after each keeps references whole instead.
    db.execute("PRAGMA foreign_keys=OFF")
    try:
        return apply(db, MIGRATIONS, done, lambda: _immediate(db), "?", check=_references_whole)
    finally:
        db.execute("PRAGMA foreign_keys=ON")
