"""The base of the mixins that hold SQL both backends speak (``terms_sql``, ``documents_sql``, ``jobs_sql``).

SQL the same on SQLite and PostgreSQL is written once, with ``?`` placeholders; ``_sql`` swaps in the
backend's ``mark`` (``"?"`` for sqlite3, ``"%s"`` for psycopg). A backend's store inherits the mixin,
sets ``database`` and ``mark``, and keeps beside it only what its database does differently.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Generic, Protocol, TypeVar


class Database(Protocol):
    """What the shared SQL needs of a backend's ``Database``."""

    def rows(self, sql: str, params: Any = ()) -> list[Any]: ...

    def row(self, sql: str, params: Any = ()) -> Any: ...

    def stream(self, sql: str, params: Any = ()) -> Iterator[Any]: ...

    def write(self, work: Any) -> Any: ...


D = TypeVar("D", bound=Database)


class SharedSQL(Generic[D]):
    """A backend store's ``database`` and placeholder, and the one place ``?`` becomes it."""

    database: D
    mark: str  # the driver's placeholder: "?" (sqlite3) or "%s" (psycopg)

    def _sql(self, sql: str) -> str:
        return sql.replace("?", self.mark)
