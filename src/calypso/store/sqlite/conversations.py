"""Conversations and their messages in SQLite."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from calypso.errors import NotFound
from calypso.models import Conversation, Listing, Order, StoredMessage
from calypso.store.sqlite.database import Database

_CONVERSATION_COLUMNS = "id, workspace, bot_id, created_at, metadata"


def _conversation(row: sqlite3.Row) -> Conversation:
    return Conversation(row["id"], row["workspace"], row["bot_id"], row["created_at"], json.loads(row["metadata"]))


def _message(row: sqlite3.Row) -> StoredMessage:
    citations = json.loads(row["citations"]) if row["citations"] is not None else None
    return StoredMessage(row["id"], row["role"], row["content"], citations, row["created_at"], json.loads(row["extra"]))


class SQLiteConversationStore:
    """``calypso.store.base.ConversationStore`` on SQLite; a turn is one transaction."""

    def __init__(self, database: Database) -> None:
        self.database = database

    def create(self, conversation: Conversation) -> None:
        def work(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO conversations (id, workspace, bot_id, created_at, metadata) VALUES (?, ?, ?, ?, ?)",
                (
                    conversation.id,
                    conversation.workspace,
                    conversation.bot_id,
                    conversation.created_at,
                    json.dumps(conversation.metadata),
                ),
            )

        self.database.write(work)

    def get(self, workspace: str, conversation_id: str) -> Conversation | None:
        row = self.database.row(
            f"SELECT {_CONVERSATION_COLUMNS} FROM conversations WHERE workspace = ? AND id = ?",
            (workspace, conversation_id),
        )
        return _conversation(row) if row else None

    def list_conversations(self, workspace: str, limit: int, after: str | None, order: Order) -> Listing[Conversation]:
        where, args = ["workspace = ?"], [workspace]
        if after is not None:
            row = self.database.row("SELECT key FROM conversations WHERE workspace = ? AND id = ?", (workspace, after))
            if row is None:
                raise NotFound(
                    f"No conversation {after!r} to page after; pass an id from the previous page.", param="after"
                )
            where.append("key < ?" if order == "desc" else "key > ?")
            args.append(row["key"])
        direction = "DESC" if order == "desc" else "ASC"
        rows = self.database.rows(
            f"SELECT {_CONVERSATION_COLUMNS} FROM conversations WHERE {' AND '.join(where)} "
            f"ORDER BY key {direction} LIMIT ?",
            (*args, limit + 1),
        )
        return Listing([_conversation(r) for r in rows[:limit]], has_more=len(rows) > limit)

    def delete(self, workspace: str, conversation_id: str) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            # Messages go with it (ON DELETE CASCADE).
            cursor = db.execute(
                "DELETE FROM conversations WHERE workspace = ? AND id = ?", (workspace, conversation_id)
            )
            return cursor.rowcount > 0

        return self.database.write(work)

    def messages(self, workspace: str, conversation_id: str) -> list[StoredMessage]:
        rows = self.database.rows(
            "SELECT m.id, m.role, m.content, m.citations, m.extra, m.created_at FROM conversation_messages m "
            "JOIN conversations c ON c.key = m.conversation_key WHERE c.workspace = ? AND c.id = ? ORDER BY m.key",
            (workspace, conversation_id),
        )
        return [_message(r) for r in rows]

    def add_turn(self, workspace: str, conversation_id: str, messages: Sequence[StoredMessage]) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            row = db.execute(
                "SELECT key FROM conversations WHERE workspace = ? AND id = ?", (workspace, conversation_id)
            ).fetchone()
            if row is None:
                return False
            db.executemany(
                "INSERT INTO conversation_messages (id, conversation_key, role, content, citations, extra, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        m.id,
                        row["key"],
                        m.role,
                        m.content,
                        None if m.citations is None else json.dumps(m.citations, ensure_ascii=False),
                        json.dumps(m.extra, ensure_ascii=False),
                        m.created_at,
                    )
                    for m in messages
                ],
            )
            return True

        return self.database.write(work)

    def update_metadata(self, workspace: str, conversation_id: str, metadata: dict[str, Any]) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            cursor = db.execute(
                "UPDATE conversations SET metadata = ? WHERE workspace = ? AND id = ?",
                (json.dumps(metadata), workspace, conversation_id),
            )
            return cursor.rowcount > 0

        return self.database.write(work)

    def delete_message(self, workspace: str, conversation_id: str, message_id: str) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            cursor = db.execute(
                "DELETE FROM conversation_messages WHERE id = ? AND conversation_key = "
                "(SELECT key FROM conversations WHERE workspace = ? AND id = ?)",
                (message_id, workspace, conversation_id),
            )
            return cursor.rowcount > 0

        return self.database.write(work)

    def claim_turn(self, workspace: str, conversation_id: str, owner: str, lease_seconds: float) -> bool:
        return True  # one process holds the data directory: ConversationService's asyncio lock orders its turns

    def release_turn(self, workspace: str, conversation_id: str, owner: str) -> None:
        return None
