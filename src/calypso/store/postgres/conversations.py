"""Conversations and their messages in PostgreSQL."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg.types.json import Json

from calypso.errors import NotFound
from calypso.models import Conversation, Listing, Order, StoredMessage
from calypso.store.postgres.database import Connection, Database, Row, text

_CONVERSATION_COLUMNS = "id, workspace, bot_id, created_at, metadata"


def _conversation(row: Row) -> Conversation:
    conversation_id, workspace, bot_id, created_at, metadata = row
    return Conversation(conversation_id, workspace, bot_id, created_at, metadata)


def _message(row: Row) -> StoredMessage:
    message_id, role, content, citations, extra, created_at = row
    return StoredMessage(message_id, role, content, citations, created_at, extra)


class PostgresConversationStore:
    """``calypso.store.base.ConversationStore`` on PostgreSQL; a turn is one transaction."""

    def __init__(self, database: Database) -> None:
        self.database = database

    def create(self, conversation: Conversation) -> None:
        self.database.write(
            lambda db: db.execute(
                "INSERT INTO conversations (id, workspace, bot_id, created_at, metadata) VALUES (%s, %s, %s, %s, %s)",
                (
                    conversation.id,
                    conversation.workspace,
                    conversation.bot_id,
                    conversation.created_at,
                    Json(conversation.metadata),
                ),
            )
        )

    def get(self, workspace: str, conversation_id: str) -> Conversation | None:
        row = self.database.row(
            f"SELECT {_CONVERSATION_COLUMNS} FROM conversations WHERE workspace = %s AND id = %s",
            (workspace, conversation_id),
        )
        return _conversation(row) if row else None

    def list_conversations(self, workspace: str, limit: int, after: str | None, order: Order) -> Listing[Conversation]:
        where, args = ["workspace = %s"], [workspace]
        if after is not None:
            row = self.database.row(
                "SELECT key FROM conversations WHERE workspace = %s AND id = %s", (workspace, after)
            )
            if row is None:
                raise NotFound(
                    f"No conversation {after!r} to page after; pass an id from the previous page.", param="after"
                )
            where.append("key < %s" if order == "desc" else "key > %s")
            args.append(row[0])
        direction = "DESC" if order == "desc" else "ASC"
        rows = self.database.rows(
            f"SELECT {_CONVERSATION_COLUMNS} FROM conversations WHERE {' AND '.join(where)} "
            f"ORDER BY key {direction} LIMIT %s",
            (*args, limit + 1),
        )
        return Listing([_conversation(r) for r in rows[:limit]], has_more=len(rows) > limit)

    def delete(self, workspace: str, conversation_id: str) -> bool:
        # Messages go with it (ON DELETE CASCADE).
        deleted = self.database.write(
            lambda db: db.execute(
                "DELETE FROM conversations WHERE workspace = %s AND id = %s RETURNING 1", (workspace, conversation_id)
            ).fetchone()
        )
        return deleted is not None

    def messages(self, workspace: str, conversation_id: str) -> list[StoredMessage]:
        rows = self.database.rows(
            "SELECT m.id, m.role, m.content, m.citations, m.extra, m.created_at FROM conversation_messages m "
            "JOIN conversations c ON c.key = m.conversation_key WHERE c.workspace = %s AND c.id = %s ORDER BY m.key",
            (workspace, conversation_id),
        )
        return [_message(r) for r in rows]

    def add_turn(self, workspace: str, conversation_id: str, messages: Sequence[StoredMessage]) -> bool:
        def work(db: Connection) -> bool:
            # FOR UPDATE: turns appended by other processes wait, so one turn's messages stay contiguous,
            # and a concurrent delete waits too (or has already happened, and nothing is written).
            row = db.execute(
                "SELECT key FROM conversations WHERE workspace = %s AND id = %s FOR UPDATE",
                (workspace, conversation_id),
            ).fetchone()
            if row is None:
                return False
            db.cursor().executemany(
                "INSERT INTO conversation_messages (id, conversation_key, role, content, citations, extra, created_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                [
                    (
                        m.id,
                        row[0],
                        m.role,
                        None if m.content is None else text(m.content),
                        None if m.citations is None else Json(m.citations),
                        Json(m.extra),
                        m.created_at,
                    )
                    for m in messages
                ],
            )
            return True

        return self.database.write(work)

    def update_metadata(self, workspace: str, conversation_id: str, metadata: dict[str, Any]) -> bool:
        updated = self.database.write(
            lambda db: db.execute(
                "UPDATE conversations SET metadata = %s WHERE workspace = %s AND id = %s RETURNING 1",
                (Json(metadata), workspace, conversation_id),
            ).fetchone()
        )
        return updated is not None

    def delete_message(self, workspace: str, conversation_id: str, message_id: str) -> bool:
        deleted = self.database.write(
            lambda db: db.execute(
                "DELETE FROM conversation_messages WHERE id = %s AND conversation_key = "
                "(SELECT key FROM conversations WHERE workspace = %s AND id = %s) RETURNING 1",
                (message_id, workspace, conversation_id),
            ).fetchone()
        )
        return deleted is not None

    def claim_turn(self, workspace: str, conversation_id: str, owner: str, lease_seconds: float) -> bool:
        # The database's clock, so processes on different hosts agree on when a lease ran out.
        row = self.database.write(
            lambda db: db.execute(
                "UPDATE conversations SET turn_owner = %s, turn_until = now() + make_interval(secs => %s) "
                "WHERE workspace = %s AND id = %s AND (turn_owner IS NULL OR turn_owner = %s OR turn_until < now()) "
                "RETURNING key",
                (owner, lease_seconds, workspace, conversation_id, owner),
            ).fetchone()
        )
        return row is not None

    def release_turn(self, workspace: str, conversation_id: str, owner: str) -> None:
        self.database.write(
            lambda db: db.execute(
                "UPDATE conversations SET turn_owner = NULL, turn_until = NULL "
                "WHERE workspace = %s AND id = %s AND turn_owner = %s",
                (workspace, conversation_id, owner),
            )
        )
