"""The body of ``POST /v1/sources``, one model per type (``type`` picks it), as strict as the service.

``sources/settings.py`` checks the same fields again for every caller (the CLI too) and what a schema
cannot say: whether a folder is under ``CALYPSO_SOURCE_ROOTS`` and exists, whether a URL's host is valid.
"""

from __future__ import annotations

import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError

from calypso.scope import NAME_SCHEMA
from calypso.validation import NON_BLANK, WHOLE, invalid_request_from

Text = Annotated[str, Field(min_length=1, max_length=2000, pattern=NON_BLANK)]
Glob = Annotated[str, Field(min_length=1, max_length=200)]
Globs = Annotated[list[Glob], Field(max_length=50)]
HttpUrl = Annotated[str, Field(min_length=1, max_length=2000, pattern=r"^[Hh][Tt][Tt][Pp][Ss]?://[^\s/?#]+")]
# seconds (at least a minute), or a count of minutes, hours or days
Schedule = (
    Annotated[StrictInt, Field(ge=60, le=10**9), WHOLE]
    | Annotated[str, Field(pattern=r"^\s*[1-9][0-9]{0,6}\s*[mhd]\s*$")]
    | None
)


class _Source(BaseModel):
    model_config = ConfigDict(extra="forbid")
    namespace: str | None = Field(None, json_schema_extra=NAME_SCHEMA)
    schedule: Schedule = Field(None, description="Sync every: seconds, or '15m', '6h', '1d'; null: only when asked.")


class WebsiteSource(_Source):
    type: Literal["website"]
    url: HttpUrl = Field(description="A start page, or a sitemap (its path ends in .xml).")
    follow_links: StrictBool | None = None
    max_depth: Annotated[StrictInt, Field(ge=0, le=20), WHOLE] = 3
    max_pages: Annotated[StrictInt, Field(ge=1, le=100_000), WHOLE] = 1000
    requests_per_second: Annotated[float, Field(ge=0.1, le=1000.0)] = 10.0


class FolderSource(_Source):
    type: Literal["folder"]
    path: Annotated[str, Field(min_length=2, max_length=2000, pattern=r"^/")] = Field(
        description="A directory on the server, under CALYPSO_SOURCE_ROOTS."
    )
    recursive: StrictBool = True
    include: Globs = ["*"]
    exclude: Globs = []
    settle_seconds: Annotated[float, Field(ge=0.0, le=3600.0)] = 2.0


class GitSource(_Source):
    type: Literal["git"]
    url: Annotated[str, Field(min_length=2, max_length=2000, pattern=r"^(/|[Hh][Tt][Tt][Pp][Ss]?://[^\s/?#]+)")] = (
        Field(description="An http(s) clone URL, or a local path under CALYPSO_SOURCE_ROOTS.")
    )
    branch: Annotated[str, Field(max_length=200, pattern=r"^[A-Za-z0-9_](\.?[A-Za-z0-9_/-])*$")] = "main"
    include: Globs = ["*.md", "*.markdown", "*.rst", "*.txt", "*.pdf"]
    exclude: Globs = []
    link_template: Annotated[str, Field(max_length=2000, pattern=r"^https?://")] | None = None


class ImapSource(_Source):
    type: Literal["imap"]
    host: Annotated[str, Field(pattern=r"^([A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])$")]
    port: Annotated[StrictInt, Field(ge=1, le=65535), WHOLE] | None = None
    security: Literal["tls", "starttls"] = "tls"
    username: Text
    password: Text = Field(description="Stored encrypted; never returned.")
    folders: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=200, pattern=r'^[^"]*$')]],
        Field(min_length=1, max_length=50),
    ] = ["INBOX"]
    since: datetime.date | None = None
    verify_tls: StrictBool = True
    max_messages: Annotated[StrictInt, Field(ge=1, le=1_000_000), WHOLE] = 10_000


MODELS: dict[str, type[_Source]] = {
    "website": WebsiteSource,
    "folder": FolderSource,
    "git": GitSource,
    "imap": ImapSource,
}


def create_source_schema() -> dict[str, Any]:
    """One of the four bodies, each inlined (none has definitions of its own), told apart by ``type``."""
    return {"oneOf": [model.model_json_schema() for model in MODELS.values()]}


def check_create_source(body: dict[str, Any]) -> dict[str, Any]:
    """The fields as the type's model reads them, or a 400 naming the field; an unknown type is left for the
    service to refuse (it names the types it knows)."""
    kind = body.get("type")
    model = MODELS.get(kind) if isinstance(kind, str) else None
    if model is None:
        return body
    try:
        checked = model.model_validate(body)
    except ValidationError as exc:
        raise invalid_request_from(exc, body, model=model) from exc
    return checked.model_dump(mode="json", exclude_unset=True) | {"type": body["type"]}
