"""A source's settings as a client sends them, checked per type: every refusal names its field (``param``).

``parse`` splits a request's fields into the settings kept in the clear and the secrets kept encrypted;
nothing is fetched here except what must exist on this server (a folder, a local repository).
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from calypso.errors import InvalidRequest
from calypso.ingest.crawl import check_url

TYPES = ("website", "folder", "git", "imap")
BUILT = TYPES  # the types a connector reads; the others answer "not supported yet"
COMMON = frozenset({"type", "namespace", "schedule"})
MIN_SCHEDULE_SECONDS = 60
MAX_SCHEDULE_SECONDS = 10**9
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_GLOBS_AT_MOST = 50
DEFAULT_GIT_GLOBS = ["*.md", "*.markdown", "*.rst", "*.txt", "*.pdf"]
_BRANCH = re.compile(r"[A-Za-z0-9._/-]{1,200}")
_HOST = re.compile(r"[A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]")


@dataclass(frozen=True)
class Parsed:
    type: str
    settings: dict[str, Any]
    secrets: dict[str, str]
    schedule_seconds: int | None


def schedule_seconds(value: object) -> int | None:
    """``3600``, ``"90s"``, ``"15m"``, ``"1h"``, ``"1d"`` or null; at least a minute."""
    if value is None:
        return None
    seconds: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        seconds = value
    elif isinstance(value, str) and (match := re.fullmatch(r"\s*(\d{1,7})\s*([smhd])\s*", value)):
        seconds = int(match.group(1)) * _UNITS[match.group(2)]
    if seconds is None or not MIN_SCHEDULE_SECONDS <= seconds <= MAX_SCHEDULE_SECONDS:
        raise InvalidRequest(
            f"schedule must be a number of seconds (at least {MIN_SCHEDULE_SECONDS}) or a duration like "
            "'15m', '6h', '1d'; null syncs only when asked.",
            param="schedule",
        )
    return seconds


def _text(body: dict[str, Any], name: str, *, required: bool = False, default: str | None = None) -> str | None:
    value = body.get(name, default)
    if value is None:
        if required:
            raise InvalidRequest(f"{name} is required for a {body.get('type')} source.", param=name)
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > 2000:
        raise InvalidRequest(f"{name} must be a non-empty string of at most 2000 characters.", param=name)
    return value


def _int(body: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = default if body.get(name) is None else body[name]
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidRequest(f"{name} must be a whole number from {low} to {high}.", param=name)
    return value


def _number(body: dict[str, Any], name: str, default: float, low: float, high: float) -> float:
    value = default if body.get(name) is None else body[name]
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidRequest(f"{name} must be a number from {low:g} to {high:g}.", param=name)
    return float(value)


def _bool(body: dict[str, Any], name: str, default: bool) -> bool:
    value = default if body.get(name) is None else body[name]
    if not isinstance(value, bool):
        raise InvalidRequest(f"{name} must be true or false.", param=name)
    return value


def _globs(body: dict[str, Any], name: str, default: list[str]) -> list[str]:
    value = default if body.get(name) is None else body[name]
    if (
        not isinstance(value, list)
        or len(value) > _GLOBS_AT_MOST
        or not all(isinstance(g, str) and 0 < len(g) <= 200 for g in value)
    ):
        raise InvalidRequest(
            f"{name} must be a list of at most {_GLOBS_AT_MOST} glob patterns such as '*.md' or 'docs/**'.", param=name
        )
    return list(value)


def _under_roots(path: str, roots: list[Path], param: str) -> Path:
    """The resolved directory, when it lies under a root the operator allowed."""
    candidate = Path(path)
    if not candidate.is_absolute():
        raise InvalidRequest(f"{param} must be an absolute path on the server, not {path!r}.", param=param)
    resolved = candidate.resolve()
    if not any(resolved == root or root in resolved.parents for root in roots):
        allowed = ", ".join(str(r) for r in roots) or "none"
        raise InvalidRequest(
            f"{path!r} is not under a directory sources may read (allowed: {allowed}); the operator sets them "
            "with CALYPSO_SOURCE_ROOTS.",
            param=param,
            code="path_not_allowed",
        )
    if not resolved.is_dir():
        raise InvalidRequest(f"{path!r} is not a directory on the server.", param=param, code="path_not_found")
    return resolved


def _website(body: dict[str, Any]) -> dict[str, Any]:
    url = _text(body, "url", required=True)
    assert url is not None
    check_url(url)
    sitemap = urlsplit(url).path.lower().endswith((".xml", ".xml.gz"))
    return {
        "url": url,
        "sitemap": sitemap,
        "follow_links": _bool(body, "follow_links", not sitemap),
        "max_depth": _int(body, "max_depth", 3, 0, 20),
        "max_pages": _int(body, "max_pages", 1000, 1, 100_000),
        "requests_per_second": _number(body, "requests_per_second", 10.0, 0.1, 1000.0),
    }


def _folder(body: dict[str, Any], roots: list[Path]) -> dict[str, Any]:
    path = _text(body, "path", required=True)
    assert path is not None
    return {
        "path": str(_under_roots(path, roots, "path")),
        "recursive": _bool(body, "recursive", True),
        "include": _globs(body, "include", ["*"]),
        "exclude": _globs(body, "exclude", []),
        "settle_seconds": _number(body, "settle_seconds", 2.0, 0.0, 3600.0),
    }


def _git(body: dict[str, Any], roots: list[Path]) -> dict[str, Any]:
    url = _text(body, "url", required=True)
    assert url is not None
    if url.startswith("/"):
        url = str(_under_roots(url, roots, "url"))
    else:
        check_url(url)  # http(s) only: no ssh, file or ext transports through the API
    branch = _text(body, "branch", default="main")
    if branch is None or not _BRANCH.fullmatch(branch) or ".." in branch or branch.startswith("-"):
        raise InvalidRequest("branch must be a branch name such as 'main'.", param="branch")
    link = _text(body, "link_template")
    if link is not None and not link.startswith(("http://", "https://")):
        raise InvalidRequest(
            "link_template must be an http(s) URL with {commit} and {path}, e.g. "
            "'https://git.example/repo/blob/{commit}/{path}'.",
            param="link_template",
        )
    return {
        "url": url,
        "branch": branch,
        "include": _globs(body, "include", DEFAULT_GIT_GLOBS),
        "exclude": _globs(body, "exclude", []),
        "link_template": link,
    }


def _imap(body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    host = _text(body, "host", required=True)
    if host is None or not _HOST.fullmatch(host):
        raise InvalidRequest("host must be the IMAP server's host name or address.", param="host")
    security = body.get("security") or "tls"
    if security not in ("tls", "starttls"):
        raise InvalidRequest("security must be 'tls' (IMAPS) or 'starttls'.", param="security")
    username = _text(body, "username", required=True)
    password = _text(body, "password", required=True)
    assert username is not None and password is not None
    folders = body.get("folders") or ["INBOX"]
    if (
        not isinstance(folders, list)
        or not 0 < len(folders) <= 50
        or not all(isinstance(f, str) and 0 < len(f) <= 200 and '"' not in f for f in folders)
    ):
        raise InvalidRequest("folders must be a list of 1-50 mailbox names such as 'INBOX'.", param="folders")
    since = body.get("since")
    if since is not None:
        try:
            datetime.date.fromisoformat(str(since))
        except ValueError as exc:
            raise InvalidRequest("since must be a date such as '2026-01-31'.", param="since") from exc
    settings = {
        "host": host,
        "port": _int(body, "port", 993 if security == "tls" else 143, 1, 65535),
        "security": security,
        "username": username,
        "folders": folders,
        "since": since,
        "verify_tls": _bool(body, "verify_tls", True),
        "max_messages": _int(body, "max_messages", 10_000, 1, 1_000_000),
    }
    return settings, {"password": password}


_FIELDS = {
    "website": {"url", "follow_links", "max_depth", "max_pages", "requests_per_second"},
    "folder": {"path", "recursive", "include", "exclude", "settle_seconds"},
    "git": {"url", "branch", "include", "exclude", "link_template"},
    "imap": {"host", "port", "security", "username", "password", "folders", "since", "verify_tls", "max_messages"},
}


def parse(body: dict[str, Any], roots: list[Path]) -> Parsed:
    """Check a create request's fields for its ``type``; InvalidRequest naming the field otherwise."""
    kind = body.get("type")
    if kind not in TYPES:
        raise InvalidRequest(
            f"Unknown source type {kind!r}: use one of {', '.join(TYPES)}.", param="type", code="invalid_value"
        )
    if kind not in BUILT:
        raise InvalidRequest(
            f"{kind} sources are not supported yet by this server; supported: {', '.join(BUILT)}.",
            param="type",
            code="not_supported",
        )
    unknown = sorted(set(body) - COMMON - _FIELDS[kind])
    if unknown:
        raise InvalidRequest(
            f"A {kind} source has no field {unknown[0]!r}; its fields are {', '.join(sorted(_FIELDS[kind]))}.",
            param=unknown[0],
        )
    secrets: dict[str, str] = {}
    if kind == "website":
        settings = _website(body)
    elif kind == "folder":
        settings = _folder(body, roots)
    elif kind == "git":
        settings = _git(body, roots)
    else:
        settings, secrets = _imap(body)
    return Parsed(kind, settings, secrets, schedule_seconds(body.get("schedule")))
