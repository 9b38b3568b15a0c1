"""The process's log format: plain lines for people, or one JSON object per line for log collectors.

``CALYPSO_LOG_FORMAT=json`` gives ``{"time", "level", "logger", "message", "request_id"?, "exception"?}``
per record, uvicorn's access and error logs included, so a request's lines can be found by the id its
client got in ``x-request-id`` (``api/request_ids.py`` sets it for the request's task).
"""

from __future__ import annotations

import json
import logging
import os
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Literal

LogFormat = Literal["text", "json"]
REQUEST_ID: ContextVar[str | None] = ContextVar("calypso_request_id", default=None)
TEXT_FORMAT = "%(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = REQUEST_ID.get()
        if request_id is not None:
            entry["request_id"] = request_id
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def log_format() -> LogFormat:
    return "json" if os.environ.get("CALYPSO_LOG_FORMAT", "").strip().lower() == "json" else "text"


def configure(level: str, form: LogFormat) -> None:
    """Send every logger's records (uvicorn's too) to stderr in ``form``."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if form == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    if form == "json":
        for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
            logger = logging.getLogger(name)
            logger.handlers[:] = []
            logger.propagate = True
