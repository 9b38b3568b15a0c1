"""Calypso's errors as gRPC statuses: each ``CalypsoError`` class names its status code (``grpc_status``).

Servicer methods are wrapped by ``rpc`` (unary and client-streaming) or
``rpc_stream`` (server-streaming): an error a client caused ends the call with
its code and the error's message (which says how to fix it); anything
unexpected is logged and ends the call ``INTERNAL`` without internals.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc

from calypso.errors import CalypsoError
from calypso.services import request_budget

log = logging.getLogger("calypso.grpc")

T = TypeVar("T")


def status_of(exc: CalypsoError) -> grpc.StatusCode:
    return getattr(grpc.StatusCode, exc.grpc_status, grpc.StatusCode.INTERNAL)


async def _abort(context: grpc.aio.ServicerContext, exc: Exception, method: str) -> None:
    if isinstance(exc, CalypsoError):
        message = exc.message if exc.param is None else f"{exc.message} (field: {exc.param})"
        await context.abort(status_of(exc), message)
    log.exception("gRPC %s failed", method, exc_info=exc)
    await context.abort(grpc.StatusCode.INTERNAL, f"{method} failed on the server; the error is in its log.")


def rpc(method: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """A unary (or client-streaming) servicer method whose Calypso errors become gRPC statuses."""

    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> T:
        try:
            with request_budget():  # the call's database waits, together, at most the pool timeout
                return await method(self, request, context)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:  # noqa: BLE001 - mapped to a status, unexpected ones logged
            await _abort(context, exc, method.__name__)
            raise  # unreachable: abort raises

    return wrapper


def rpc_stream(method: Callable[..., AsyncIterator[T]]) -> Callable[..., AsyncIterator[T]]:
    """A server-streaming servicer method: an error, even after the first message, ends the stream with its status."""

    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[T]:
        try:
            with request_budget():
                async for item in method(self, request, context):
                    yield item
        except grpc.aio.AbortError:
            raise
        except Exception as exc:  # noqa: BLE001 - mapped to a status, unexpected ones logged
            await _abort(context, exc, method.__name__)

    return wrapper
