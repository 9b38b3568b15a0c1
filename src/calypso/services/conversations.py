"""The conversations service (seed 004): conversations with a bot, stored one whole turn at a time.

A turn (the user message and the assistant's answer) is written in one
transaction, only after the answer is complete, so a failed or cancelled
generation leaves no half turn behind. Turns on one conversation are
serialised by ``turn_lock``: that covers one server process; several
processes need a database lock instead (see docs/citations-chat.md).
"""

from __future__ import annotations

import asyncio
import time
import uuid
import weakref
from typing import Any

from calypso.errors import NotFound
from calypso.models import Conversation, Listing, Order, StoredMessage
from calypso.scope import DEFAULT_WORKSPACE
from calypso.store.base import ConversationStore


def new_message(
    role: str, content: str | None, citations: list[dict[str, Any]] | None = None, **extra: Any
) -> StoredMessage:
    return StoredMessage(f"msg_{uuid.uuid4().hex}", role, content, citations, int(time.time()), dict(extra))


class HeldLock:
    """A turn lock, released once, by whichever of done, close or error gets there first."""

    def __init__(self, lock: asyncio.Lock) -> None:
        self.lock, self.held = lock, True

    def release(self) -> None:
        if self.held:
            self.held = False
            self.lock.release()


def _missing(conversation_id: str) -> NotFound:
    return NotFound(
        f"No conversation with id {conversation_id!r}; create one with POST /v1/conversations.",
        param="conversation_id",
    )


class ConversationService:
    def __init__(self, store: ConversationStore) -> None:
        self.store = store
        # Weak values: a lock lives while a turn holds or waits for it.
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    def create(
        self, bot_id: str, metadata: dict[str, Any] | None = None, workspace: str = DEFAULT_WORKSPACE
    ) -> Conversation:
        conversation = Conversation(f"conv_{uuid.uuid4().hex}", workspace, bot_id, int(time.time()), metadata or {})
        self.store.create(conversation)
        return conversation

    def get(self, conversation_id: str, workspace: str = DEFAULT_WORKSPACE) -> Conversation:
        conversation = self.store.get(workspace, conversation_id)
        if conversation is None:
            raise _missing(conversation_id)
        return conversation

    def list_conversations(
        self, limit: int, after: str | None = None, order: Order = "desc", workspace: str = DEFAULT_WORKSPACE
    ) -> Listing[Conversation]:
        return self.store.list_conversations(workspace, limit, after, order)

    def delete(self, conversation_id: str, workspace: str = DEFAULT_WORKSPACE) -> None:
        if not self.store.delete(workspace, conversation_id):
            raise NotFound(f"No conversation with id {conversation_id!r}.", param="conversation_id")

    def messages(self, conversation_id: str, workspace: str = DEFAULT_WORKSPACE) -> list[StoredMessage]:
        return self.store.messages(workspace, conversation_id)

    def add_turn(self, conversation_id: str, *messages: StoredMessage, workspace: str = DEFAULT_WORKSPACE) -> None:
        """Append one turn atomically; NotFound (nothing stored) if the conversation was deleted meanwhile."""
        if not self.store.add_turn(workspace, conversation_id, messages):
            raise NotFound(
                f"The conversation {conversation_id!r} was deleted while answering; nothing was stored.",
                param="conversation_id",
            )

    def update_metadata(
        self, conversation_id: str, metadata: dict[str, Any], workspace: str = DEFAULT_WORKSPACE
    ) -> Conversation:
        if not self.store.update_metadata(workspace, conversation_id, metadata):
            raise _missing(conversation_id)
        return self.get(conversation_id, workspace)

    def delete_message(self, conversation_id: str, message_id: str, workspace: str = DEFAULT_WORKSPACE) -> None:
        if not self.store.delete_message(workspace, conversation_id, message_id):
            self.get(conversation_id, workspace)  # an unknown conversation is its own 404
            raise NotFound(f"No item {message_id!r} in conversation {conversation_id!r}.", param="item_id")

    async def hold_turn(self, conversation_id: str) -> HeldLock:
        """Wait for the conversation's turn lock and hold it (seed 004's turns and Responses turns share it)."""
        lock = self.turn_lock(conversation_id)
        await lock.acquire()
        return HeldLock(lock)

    def turn_lock(self, conversation_id: str) -> asyncio.Lock:
        """The lock that serialises turns on one conversation in this process."""
        lock = self._locks.get(conversation_id)
        if lock is None:
            lock = self._locks[conversation_id] = asyncio.Lock()
        return lock
