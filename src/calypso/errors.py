"""One exception tree for Calypso.

Every error a client can see is a ``CalypsoError``; the API turns it into
OpenAI's shape ``{"error": {"message", "type", "param", "code"}}`` with the
class's HTTP status. The xAI gRPC surface (``calypso.grpc_api``) sends the
class's ``grpc_status`` (a ``grpc.StatusCode`` name) with the same message.

    CalypsoError                       500 server_error
    ├── InvalidRequest                 400 invalid_request_error
    │   ├── EmptyDocument              400 (code: empty_file)
    │   ├── InvalidNamespace           400 (code: invalid_namespace)
    │   ├── UnknownGenerator           400 (code: unknown_generator; also a LookupError)
    │   └── ArchiveUnreadable          400 (code: archive_unreadable): `calypso import` of a truncated or corrupt file
    │       └── ArchiveTooNew          400 (code: archive_too_new): written by a newer Calypso
    ├── AuthenticationFailed           401 invalid_request_error (code: invalid_api_key, as OpenAI)
    │   └── MissingApiKey              401 (code: null: OpenAI's answer to a request without a key)
    ├── PermissionDenied               403 permission_error
    ├── NotFound                       404 invalid_request_error (code: not_found)
    ├── Conflict                       409 invalid_request_error (code: conflict)
    ├── PayloadTooLarge                413 invalid_request_error (code: file_too_large)
    ├── UnsupportedMediaType           415 invalid_request_error (code: unsupported_file_type)
    ├── RangeNotSatisfiable            416 invalid_request_error (code: range_not_satisfiable; Content-Range)
    ├── UnprocessableDocument          422 invalid_request_error (code: unprocessable_document)
    ├── UpstreamError                  502 upstream_error
    │   ├── UpstreamTimeout            504 upstream_error (code: timeout)
    │   └── UpstreamBusy               503 upstream_error (code: too_many_concurrent_requests; Retry-After)
    └── StorageError                   500 server_error
        ├── StoreUnavailable           503 server_error (code: database_unavailable; Retry-After)
        ├── InsufficientStorage        507 server_error (code: insufficient_storage; x-should-retry: false)
        └── DataDirectoryInUse         at start: another process holds the data directory
"""

from __future__ import annotations

from typing import Any


class CalypsoError(Exception):
    """Base class: a message that says how to fix the problem, plus the OpenAI error fields."""

    status: int = 500
    type: str = "server_error"
    default_code: str | None = None
    retry_after_seconds: int | None = None  # sent as Retry-After: the condition is expected to pass
    grpc_status: str = "INTERNAL"  # a grpc.StatusCode name; a name, so this module needs no grpc

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code if code is not None else self.default_code

    def __reduce__(self) -> tuple[Any, ...]:
        # Keeps param and code across processes (errors raised while parsing in a child come back pickled).
        return (_rebuild, (type(self), self.message, self.param, self.code))

    def to_dict(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def headers(self) -> dict[str, str]:
        """HTTP headers the error response carries besides its body."""
        return {"Retry-After": str(self.retry_after_seconds)} if self.retry_after_seconds is not None else {}


class InvalidRequest(CalypsoError):
    status = 400
    type = "invalid_request_error"
    grpc_status = "INVALID_ARGUMENT"


class EmptyDocument(InvalidRequest):
    default_code = "empty_file"


class InvalidNamespace(InvalidRequest):
    default_code = "invalid_namespace"


class UnknownGenerator(InvalidRequest, LookupError):
    """A generator name the registry does not have (a bot's stored generator whose plugin went away)."""

    default_code = "unknown_generator"


class ArchiveUnreadable(InvalidRequest):
    """A knowledge-base archive that is not one, or is truncated or corrupt: nothing was imported."""

    default_code = "archive_unreadable"


class ArchiveTooNew(ArchiveUnreadable):
    """An archive in a format newer than this Calypso reads: nothing was imported."""

    default_code = "archive_too_new"


class AuthenticationFailed(CalypsoError):
    status = 401
    type = "invalid_request_error"  # what OpenAI answers a missing or wrong key with (issue 25)
    default_code: str | None = "invalid_api_key"
    grpc_status = "UNAUTHENTICATED"


class MissingApiKey(AuthenticationFailed):
    default_code = None


class PermissionDenied(CalypsoError):
    status = 403
    type = "permission_error"
    grpc_status = "PERMISSION_DENIED"


class NotFound(CalypsoError):
    status = 404
    type = "invalid_request_error"
    default_code = "not_found"
    grpc_status = "NOT_FOUND"


class Conflict(CalypsoError):
    status = 409
    type = "invalid_request_error"
    default_code = "conflict"
    grpc_status = "FAILED_PRECONDITION"


class PayloadTooLarge(CalypsoError):
    status = 413
    type = "invalid_request_error"
    default_code = "file_too_large"
    grpc_status = "INVALID_ARGUMENT"


class UnsupportedMediaType(CalypsoError):
    status = 415
    type = "invalid_request_error"
    default_code = "unsupported_file_type"
    grpc_status = "INVALID_ARGUMENT"


class RangeNotSatisfiable(CalypsoError):
    """A ``Range`` header that selects no byte of the file; the answer says how long the file is."""

    status = 416
    type = "invalid_request_error"
    default_code = "range_not_satisfiable"

    def __init__(self, message: str, *, size: int = 0, param: str | None = "Range", code: str | None = None) -> None:
        super().__init__(message, param=param, code=code)
        self.size = size

    def headers(self) -> dict[str, str]:
        return {**super().headers(), "Content-Range": f"bytes */{self.size}"}


class UnprocessableDocument(CalypsoError):
    status = 422
    type = "invalid_request_error"
    default_code = "unprocessable_document"
    grpc_status = "INVALID_ARGUMENT"


class UpstreamError(CalypsoError):
    status = 502
    type = "upstream_error"
    grpc_status = "UNAVAILABLE"


class UpstreamTimeout(UpstreamError):
    status = 504
    default_code = "timeout"
    grpc_status = "DEADLINE_EXCEEDED"


class UpstreamBusy(UpstreamError):
    """Every upstream slot (connection to the model server) is in use; the request waited and gave up."""

    status = 503
    default_code = "too_many_concurrent_requests"
    retry_after_seconds = 1  # slots free as answers end: OpenAI's SDKs retry a 503 after this


class StorageError(CalypsoError):
    status = 500
    type = "server_error"


class StoreUnavailable(StorageError):
    """The database cannot be reached (at start, or a connection lost mid-request); nothing was half-written."""

    status = 503
    default_code = "database_unavailable"
    retry_after_seconds = 2
    grpc_status = "UNAVAILABLE"


class InsufficientStorage(StorageError):
    """The disk under the database is full (SQLite's SQLITE_FULL, PostgreSQL's 53100); nothing was half-written.

    Reads keep working and deletes free room, so the message says how to make space; no Retry-After,
    since waiting alone does not free a disk.
    """

    status = 507
    default_code = "insufficient_storage"
    grpc_status = "RESOURCE_EXHAUSTED"

    def headers(self) -> dict[str, str]:
        # OpenAI's SDKs retry every 5xx unless told not to; sending the same upload again cannot help.
        return {**super().headers(), "x-should-retry": "false"}


class DataDirectoryInUse(StorageError):
    """Another process serves or ingests into this data directory (raised at start, never over HTTP)."""

    default_code = "data_directory_in_use"


def _rebuild(cls: type[CalypsoError], message: str, param: str | None, code: str | None) -> CalypsoError:
    return cls(message, param=param, code=code)
