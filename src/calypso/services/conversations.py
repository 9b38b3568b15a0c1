"""The conversations service (seed 004): conversations with a bot, stored one whole turn at a time.

A turn (the user message and the assistant's answer) is written in one
transaction, only after the answer is complete, so a failed or cancelled
generation leaves no half turn behind. Turns on one conversation are
serialised by ``hold_turn``: an asyncio lock in this process, and the
conversation's turn lease in the database across processes (PostgreSQL).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
import weakref
from collections.abc import Callable
from typing import Any

from calypso.errors import CalypsoError, NotFound
from calypso.models import Conversation, Listing, Order, StoredMessage
from calypso.scope import DEFAULT_WORKSPACE
from calypso.store.base import ConversationStore

TURN_LEASE = 30.0  # seconds a turn's lease lasts without renewal (renewed every third of it)
TURN_POLL = 0.05  # seconds between tries for a lease another process holds


def new_message(
    role: str, content: str | None, citations: list[dict[str, Any]] | None = None, **extra: Any
) -> StoredMessage:
    return StoredMessage(f"msg_{uuid.uuid4().hex}", role, content, citations, int(time.time()), dict(extra))


class HeldLock:
    """A conversation's turn, held; released once, by whichever of done, close or error gets there first."""

    def __init__(self, lock: asyncio.Lock, on_release: Callable[[], None] | None = None) -> None:
        self.lock, self.held, self._on_release = lock, True, on_release

    def release(self) -> None:
        if self.held:
            self.held = False
            if self._on_release is not None:
                self._on_release()
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
        self._pending: set[asyncio.Future[None]] = set()  # lease releases under way

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

    async def hold_turn(self, conversation_id: str, workspace: str = DEFAULT_WORKSPACE) -> HeldLock:
        """Wait for the conversation's turn and hold it (seed 004's turns and Responses turns share it).

        In this process an asyncio lock orders the turns; across processes (PostgreSQL) the conversation's
        turn lease does (``claim_turn``): polled while another process holds it, renewed while this turn
        runs, so a process that dies holding it delays the next turn by one lease at most.
        """
        lock = self.turn_lock(conversation_id)
        await lock.acquire()
        owner = uuid.uuid4().hex
        try:
            while not await asyncio.to_thread(self.store.claim_turn, workspace, conversation_id, owner, TURN_LEASE):
                if await asyncio.to_thread(self.store.get, workspace, conversation_id) is None:
                    raise _missing(conversation_id)
                await asyncio.sleep(TURN_POLL)
        except BaseException:
            lock.release()
            raise
        renewing = asyncio.create_task(self._renew(workspace, conversation_id, owner))

        def give_back() -> None:
            renewing.cancel()
            self._background(self.store.release_turn, workspace, conversation_id, owner)

        return HeldLock(lock, give_back)

    async def _renew(self, workspace: str, conversation_id: str, owner: str) -> None:
        while True:
            await asyncio.sleep(TURN_LEASE / 3)
            with contextlib.suppress(CalypsoError):  # the database is away: the lease may lapse, turns go on
                await asyncio.to_thread(self.store.claim_turn, workspace, conversation_id, owner, TURN_LEASE)

    def _background(self, work: Callable[..., None], *args: Any) -> None:
        """Run a quick store call off the event loop without waiting for it (a release must not block)."""
        try:
            future = asyncio.get_running_loop().run_in_executor(None, work, *args)
        except RuntimeError:  # no loop: a plain call
            with contextlib.suppress(CalypsoError):
                work(*args)
            return
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)

    def turn_lock(self, conversation_id: str) -> asyncio.Lock:
        """The lock that serialises turns on one conversation in this process."""
        lock = self._locks.get(conversation_id)
        if lock is None:
            lock = self._locks[conversation_id] = asyncio.Lock()
        return lock
