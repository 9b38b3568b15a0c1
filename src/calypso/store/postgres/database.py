"""One PostgreSQL database behind a psycopg 3 connection pool: reads, transactions, errors translated.

Every unit of work borrows a pooled connection (autocommit) and each write runs
inside one transaction, so it lands whole or not at all, also when the
connection drops halfway (the server rolls back what it never committed).
psycopg's OperationalError (connection refused or lost, server shutting down,
no pooled connection in time) becomes ``StoreUnavailable`` (503 with
Retry-After), except a full disk (SQLSTATE 53100), which is ``InsufficientStorage``
(507) as on SQLite; any other database error ``StorageError``. The pool checks a
connection before handing it out and reconnects in the background, so it
recovers by itself when the database comes back. Only the classes of this
package touch connections.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar
from urllib.parse import urlsplit

import psycopg
from psycopg.abc import Buffer
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.string import StrBinaryDumper, StrDumperUnknown
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from calypso.errors import StorageError, StoreUnavailable
from calypso.store import wait_budget
from calypso.store.disk_full import insufficient_storage, postgres_disk_full
from calypso.store.postgres.migrations import migrate

T = TypeVar("T")
Row = tuple[Any, ...]
Connection = psycopg.Connection[Row]
AsyncConnection = psycopg.AsyncConnection[Row]
Params = Sequence[object]

log = logging.getLogger("calypso.store.postgres")

STREAM_BATCH = 2000  # rows a server-side cursor fetches per round trip
LAST_TRY_SECONDS = 0.05  # a request that used up its wait still gets an idle connection, never a new wait
LOOP_POOL_SIZE = 4  # connections a server's event loop awaits its searches' reads on (``open_on_loop``)
LOOP_POOL_NAME = "calypso-search"  # their application_name in pg_stat_activity


def text(value: str) -> str:
    """PostgreSQL text cannot hold NUL; U+FFFD stands in for it, one code point for one, so offsets still hold."""
    return value.replace("\x00", "\ufffd")


class _NulSafeText(StrDumperUnknown):
    """Every str parameter without NUL, as ``text`` does for stored values: PostgreSQL text cannot hold it,
    and a lookup by an id a client sent with a NUL in it must find nothing rather than fail."""

    def dump(self, obj: str) -> Buffer | None:
        return super().dump(obj.replace("\x00", "\ufffd"))


class _NulSafeTextBinary(StrBinaryDumper):
    def dump(self, obj: str) -> Buffer | None:
        return super().dump(obj.replace("\x00", "\ufffd"))


def _configure(conn: Connection | AsyncConnection) -> None:
    conn.adapters.register_dumper(str, _NulSafeText)
    conn.adapters.register_dumper(str, _NulSafeTextBinary)


async def _configure_async(conn: AsyncConnection) -> None:
    _configure(conn)


def redact_url(url: str) -> str:
    """The URL with its password (in the authority or a ``password=`` parameter) shown as ``***``."""
    parts = urlsplit(url)
    netloc = parts.netloc
    userinfo, at, hostport = netloc.rpartition("@")
    if at:
        user, colon, password = userinfo.partition(":")
        if colon and password:
            netloc = f"{user}:***@{hostport}"
    query = re.sub(r"(?i)(^|&)(password=)[^&]*", r"\1\2***", parts.query)
    return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")


def _password(url: str) -> str | None:
    try:
        return conninfo_to_dict(url).get("password")  # type: ignore[return-value]
    except psycopg.Error:
        return None


def one_line(exc: BaseException, url: str = "") -> str:
    """An exception's message on one line, never quoting the URL's password."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    password = _password(url) if url else None
    return text.replace(password, "***") if password else text


class _Wait:
    """One wait for a pooled connection, taken out of the request's budget (``wait_budget``): at most what is left
    of the pool timeout, and once spent only a last quick try for an idle connection."""

    def __init__(self, pool_timeout: float) -> None:
        self.budget = wait_budget.current()
        spent = self.budget.spent if self.budget is not None else 0.0
        self.timeout = pool_timeout if self.budget is None else max(LAST_TRY_SECONDS, pool_timeout - spent)
        self.started = time.monotonic()
        self.counted = False

    def over(self) -> None:
        """The wait ended (a connection came, or an error): counted once."""
        if self.budget is not None and not self.counted:
            self.budget.spent += time.monotonic() - self.started
            self.counted = True


async def _fetch_all(conn: AsyncConnection, sql: str, params: Params) -> list[Row]:
    cursor = await conn.execute(sql, params)
    return await cursor.fetchall()


class Database:
    """A migrated PostgreSQL database and its pool; raises StoreUnavailable when it cannot be reached at open.

    ``timeout``: how long a request waits for a pooled connection before StoreUnavailable;
    ``reconnect_timeout``: how long the pool retries a lost connection with backoff before
    it gives up and starts afresh on the next request (this bounds recovery after an outage).
    """

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 5.0,
        reconnect_timeout: float = 10.0,
        connect_timeout: int = 5,
    ) -> None:
        self.url = url
        self.display_url = redact_url(url)
        self._listener: Connection | None = None  # wait_for_notify's LISTEN connection
        # ``open_on_loop``'s pools, by the loop each belongs to (one per serving app: tests run several at once)
        self._loop_pools: dict[asyncio.AbstractEventLoop, AsyncConnectionPool[AsyncConnection]] = {}
        self._listen_lock = threading.Lock()
        try:
            given = conninfo_to_dict(url)
        except psycopg.Error as exc:
            raise StorageError(
                f"CALYPSO_DATABASE_URL is not a valid PostgreSQL URL ({self.display_url}): {one_line(exc, url)}"
            ) from exc
        kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in given:
            kwargs["connect_timeout"] = connect_timeout
        self._connect_timeout = int(given.get("connect_timeout") or connect_timeout)
        try:
            with psycopg.connect(url, **kwargs) as conn:
                self.applied = migrate(conn)
        except psycopg.OperationalError as exc:
            raise self._unreachable(exc) from exc
        except psycopg.Error as exc:
            raise StorageError(f"Migrating PostgreSQL at {self.display_url} failed: {one_line(exc, url)}") from exc
        self._kwargs = kwargs
        self._reconnect_timeout = reconnect_timeout
        self.pool: ConnectionPool[Connection] = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            kwargs=kwargs,
            open=False,
            check=ConnectionPool.check_connection,
            configure=_configure,
            timeout=timeout,
            reconnect_timeout=reconnect_timeout,
            name="calypso",
        )
        try:
            self.pool.open(wait=True, timeout=max(timeout, float(connect_timeout)))
        except psycopg.OperationalError as exc:
            self.pool.close()
            raise self._unreachable(exc) from exc

    def _unreachable(self, exc: psycopg.Error) -> StoreUnavailable:
        return StoreUnavailable(
            f"Cannot reach PostgreSQL at {self.display_url}: {one_line(exc, self.url)} "
            "(start the database, or fix CALYPSO_DATABASE_URL)."
        )

    def _translate(self, exc: psycopg.Error) -> StorageError:
        detail = one_line(exc, self.url)
        if postgres_disk_full(exc):  # 53100 is an OperationalError too, but waiting does not fix it
            log.warning("PostgreSQL at %s is out of disk: %s", self.display_url, detail)
            return insufficient_storage(f"PostgreSQL's data ({self.display_url})")
        if isinstance(exc, psycopg.OperationalError):
            log.warning("PostgreSQL at %s unavailable: %s", self.display_url, detail)
            return StoreUnavailable("The database is unavailable; nothing was changed. Retry in a few seconds.")
        return StorageError(f"The database refused the operation: {detail}")

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        """A pooled connection in autocommit mode; psycopg errors come out translated.

        Inside a request (``wait_budget.one_request``) all its waits together last at most the pool
        timeout: once spent, a wait is only a last quick try for an idle connection.
        """
        wait = _Wait(self.pool.timeout)
        try:
            with self.pool.connection(timeout=wait.timeout) as conn:
                wait.over()
                yield conn
        except psycopg.Error as exc:
            wait.over()
            raise self._translate(exc) from exc

    def rows(self, sql: str, params: Params = ()) -> list[Row]:
        with self.connection() as conn:
            return conn.execute(sql, params).fetchall()

    # -- reads awaited on the server's event loop ----------------------------
    async def open_on_loop(self) -> None:
        """A second, asynchronous pool on the running event loop (the server's, at start): a search awaits its
        reads there instead of running on a worker thread, whose hand-over cost 0.3 ms of a keyword search over
        HTTP (docs/benchmarks/search-speed.md). Its connections open in the background; on any other loop
        ``on_this_loop`` says no and searches take a thread as before."""
        # Unchecked: a check is a round trip per read (0.16 ms of a keyword search's 0.9 over HTTP at 200k passages);
        # a read on a connection the server dropped is tried once more on another (``read_async``).
        pool: AsyncConnectionPool[AsyncConnection] = AsyncConnectionPool(
            self.url,
            min_size=1,
            max_size=LOOP_POOL_SIZE,
            kwargs={**self._kwargs, "application_name": LOOP_POOL_NAME},
            open=False,
            configure=_configure_async,
            timeout=self.pool.timeout,
            reconnect_timeout=self._reconnect_timeout,
            name="calypso-loop",
        )
        await pool.open(wait=False)
        previous = self._loop_pools.pop(asyncio.get_running_loop(), None)
        self._loop_pools[asyncio.get_running_loop()] = pool
        if previous is not None:
            await previous.close()

    async def close_on_loop(self) -> None:
        pool = self._loop_pools.pop(asyncio.get_running_loop(), None)
        if pool is not None:
            await pool.close()

    def on_this_loop(self) -> bool:
        """Whether ``read_async`` can run here: a pool was opened on the running loop."""
        return self._loop_pool() is not None

    def _loop_pool(self) -> AsyncConnectionPool[AsyncConnection] | None:
        try:
            return self._loop_pools.get(asyncio.get_running_loop())
        except RuntimeError:  # no loop running: a thread
            return None

    @asynccontextmanager
    async def connection_async(self) -> AsyncIterator[AsyncConnection]:
        """``connection`` on the event loop's pool: the same wait budget, the same errors."""
        pool = self._loop_pool()
        assert pool is not None, "open_on_loop first"
        wait = _Wait(self.pool.timeout)
        try:
            async with pool.connection(timeout=wait.timeout) as conn:
                wait.over()
                yield conn
        except psycopg.Error as exc:
            wait.over()
            raise self._translate(exc) from exc

    async def rows_async(self, sql: str, params: Params = ()) -> list[Row]:
        return await self.read_async(lambda conn: _fetch_all(conn, sql, params))

    async def read_async(self, read: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        """``read(conn)`` on a connection of the loop's pool; it must only read: when the server dropped that
        connection while it sat in the pool (a restart, an idle timeout), the pool discards it and ``read`` runs
        again on another."""
        async with self.connection_async() as conn:
            try:
                return await read(conn)
            except psycopg.OperationalError:
                if not conn.broken:
                    raise
        async with self.connection_async() as conn:
            return await read(conn)

    def row(self, sql: str, params: Params = ()) -> Row | None:
        with self.connection() as conn:
            return conn.execute(sql, params).fetchone()

    def stream(self, sql: str, params: Params = ()) -> Iterator[Row]:
        """Rows through a server-side cursor, ``STREAM_BATCH`` at a time, so a large scan never loads at once."""
        with self.connection() as conn, conn.transaction(), conn.cursor(name="calypso_stream") as cursor:
            cursor.itersize = STREAM_BATCH
            cursor.execute(sql, params)
            yield from cursor

    @contextmanager
    def snapshot(self) -> Iterator[Connection]:
        """A pooled connection in a read-only repeatable-read transaction: one state of the database."""
        with self.connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield conn

    def write(self, work: Callable[[Connection], T]) -> T:
        """Run ``work(conn)`` inside one transaction: committed when it returns, rolled back when it raises."""
        with self.connection() as conn, conn.transaction():
            return work(conn)

    def wait_for_notify(self, channel: str, timeout: float) -> bool:
        """Wait up to ``timeout`` for a NOTIFY on ``channel``, on a dedicated (non-pooled) LISTEN connection.

        True when one arrived, and also right after the connection is (re)opened, since
        notifications sent while nobody listened are lost: the caller reads what it missed.
        A lost connection raises StoreUnavailable; the next call reconnects.
        """
        with self._listen_lock:
            conn = self._listener
            try:
                if conn is None or conn.closed:
                    self._listener = None
                    conn = psycopg.connect(self.url, autocommit=True, connect_timeout=self._connect_timeout)
                    conn.execute(f"LISTEN {channel}")
                    self._listener = conn
                    return True
                for _ in conn.notifies(timeout=timeout, stop_after=1):
                    return True
                return False
            except psycopg.Error as exc:
                if conn is not None:
                    conn.close()
                self._listener = None
                raise self._translate(exc) from exc

    def close(self) -> None:
        with self._listen_lock:
            if self._listener is not None:
                self._listener.close()
                self._listener = None
        self.pool.close()
