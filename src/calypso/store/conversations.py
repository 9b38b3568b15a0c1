"""Stored conversations (seed 004): a conversation row and its messages in order.

A turn (the user message and the assistant's answer) is written in one
transaction, only after the answer is complete, so a failed or cancelled
generation leaves no half turn behind.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from dataclasses import dataclass, field

from calypso.errors import NotFound
from calypso.store.base import Listing
from calypso.store.sqlite import SQLiteStore


@dataclass
class Conversation:
    id: str
    workspace: str
    bot_id: str
    created_at: int
    metadata: dict = field(default_factory=dict)


@dataclass
class StoredMessage:
    id: str
    role: str  # "user" | "assistant"
    content: str | None
    citations: list[dict] | None  # always None on user messages
    created_at: int
    extra: dict = field(default_factory=dict)  # annotations, finish_reason, usage, plain text for the history


def new_message(role: str, content: str | None, citations: list[dict] | None = None, **extra: object) -> StoredMessage:
    return StoredMessage(f"msg_{uuid.uuid4().hex}", role, content, citations, int(time.time()), dict(extra))


def _conversation(row: sqlite3.Row) -> Conversation:
    return Conversation(row["id"], row["workspace"], row["bot_id"], row["created_at"], json.loads(row["metadata"]))


def _message(row: sqlite3.Row) -> StoredMessage:
    citations = json.loads(row["citations"]) if row["citations"] is not None else None
    return StoredMessage(row["id"], row["role"], row["content"], citations, row["created_at"], json.loads(row["extra"]))


class ConversationStore:
    """Conversations in the embedded SQLite store; writes go through its single writer."""

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store

    def create(self, workspace: str, bot_id: str, metadata: dict | None = None) -> Conversation:
        conversation = Conversation(f"conv_{uuid.uuid4().hex}", workspace, bot_id, int(time.time()), metadata or {})

        def work(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO conversations (id, workspace, bot_id, created_at, metadata) VALUES (?, ?, ?, ?, ?)",
                (conversation.id, workspace, bot_id, conversation.created_at, json.dumps(conversation.metadata)),
            )

        self.store._write(work)
        return conversation

    def get(self, workspace: str, conversation_id: str) -> Conversation:
        row = (
            self.store._connection()
            .execute(
                "SELECT id, workspace, bot_id, created_at, metadata FROM conversations WHERE workspace = ? AND id = ?",
                (workspace, conversation_id),
            )
            .fetchone()
        )
        if row is None:
            raise NotFound(
                f"No conversation with id {conversation_id!r}; create one with POST /v1/conversations.",
                param="conversation_id",
            )
        return _conversation(row)

    def list(self, workspace: str, limit: int, after: str | None = None, order: str = "desc") -> Listing:
        db = self.store._connection()
        where, args = ["workspace = ?"], [workspace]
        if after is not None:
            row = db.execute(
                "SELECT key FROM conversations WHERE workspace = ? AND id = ?", (workspace, after)
            ).fetchone()
            if row is None:
                raise NotFound(
                    f"No conversation {after!r} to page after; pass an id from the previous page.", param="after"
                )
            where.append("key < ?" if order == "desc" else "key > ?")
            args.append(row["key"])
        direction = "DESC" if order == "desc" else "ASC"
        rows = db.execute(
            f"SELECT id, workspace, bot_id, created_at, metadata FROM conversations WHERE {' AND '.join(where)} "
            f"ORDER BY key {direction} LIMIT ?",
            (*args, limit + 1),
        ).fetchall()
        return Listing([_conversation(r) for r in rows[:limit]], has_more=len(rows) > limit)

    def delete(self, workspace: str, conversation_id: str) -> None:
        def work(db: sqlite3.Connection) -> int:
            # Messages go with it (ON DELETE CASCADE).
            return db.execute(
                "DELETE FROM conversations WHERE workspace = ? AND id = ?", (workspace, conversation_id)
            ).rowcount

        if not self.store._write(work):
            raise NotFound(f"No conversation with id {conversation_id!r}.", param="conversation_id")

    def messages(self, workspace: str, conversation_id: str) -> list[StoredMessage]:
        rows = (
            self.store._connection()
            .execute(
                "SELECT m.id, m.role, m.content, m.citations, m.extra, m.created_at FROM conversation_messages m "
                "JOIN conversations c ON c.key = m.conversation_key WHERE c.workspace = ? AND c.id = ? ORDER BY m.key",
                (workspace, conversation_id),
            )
            .fetchall()
        )
        return [_message(r) for r in rows]

    def add_turn(self, workspace: str, conversation_id: str, *messages: StoredMessage) -> None:
        """Append the messages of one turn atomically; NotFound if the conversation is gone."""

        def work(db: sqlite3.Connection) -> None:
            row = db.execute(
                "SELECT key FROM conversations WHERE workspace = ? AND id = ?", (workspace, conversation_id)
            ).fetchone()
            if row is None:
                raise NotFound(
                    f"The conversation {conversation_id!r} was deleted while answering; nothing was stored.",
                    param="conversation_id",
                )
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

        self.store._write(work)
