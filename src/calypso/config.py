"""Every setting, declared once: name, default, help.

Each field can be given as the environment variable ``CALYPSO_<NAME>``
(``CALYPSO_HOME``, ``CALYPSO_MAX_UPLOAD_BYTES``…). ``calypso settings`` prints
the table.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from calypso.scope import MAX_PASSAGES

log = logging.getLogger("calypso.config")

# Deprecated names still read from the environment when the new one is unset: old name -> field.
DEPRECATED_ENV = {"CALYPSO_MAX_PARSE_MEMORY_BYTES": "parse_memory_bytes"}


DATABASE_FILE = "calypso.sqlite3"  # the embedded database in the data directory


def default_home() -> Path:
    """The user's data directory for Calypso (platformdirs: ~/.local/share/calypso on Linux).

    Not the current directory: a command run from another folder would silently start an empty
    knowledge base there.
    """
    from platformdirs import user_data_path  # imported here: only needed when no home is given

    return user_data_path("calypso", appauthor=False)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CALYPSO_", extra="ignore")

    home: Path = Field(
        default_factory=default_home,
        description="Data directory: the SQLite file and uploaded files live here (default: the user's data "
        "directory, e.g. ~/.local/share/calypso).",
    )
    database_url: str = Field(
        "",
        description="PostgreSQL URL (postgresql://user:password@host:5432/db) for many processes over one database; "
        "empty: the embedded SQLite file in the data directory.",
    )
    database_pool_size: int = Field(
        10,
        ge=1,
        le=1000,
        description="PostgreSQL connections each process may hold at most (requests, workers and the change-feed "
        "listener share them); size the server's max_connections for every process.",
    )
    host: str = Field("127.0.0.1", description="Address `calypso serve` binds to.")
    port: int = Field(8080, description="Port `calypso serve` listens on.")
    grpc_port: int = Field(
        50051,
        ge=0,
        le=65535,
        description="Port `calypso serve` also listens on for xAI's gRPC API (the xai-sdk client; needs the "
        "'xai' extra); 0: off.",
    )
    default_namespace: str = Field("general", description="Namespace used when an upload or search names none.")
    max_upload_bytes: int = Field(50 * 1024 * 1024, description="Largest accepted upload or crawled page, in bytes.")
    parse_processes: int = Field(
        2, ge=0, description="Child processes that parse uploads (0: parse inside the server, no time or memory cap)."
    )
    parse_timeout_seconds: float = Field(60.0, gt=0, description="Longest a single document may take to parse.")
    parse_memory_bytes: int = Field(
        2 * 1024**3,
        ge=64 * 1024**2,
        description="Address space a parsing child may use before the upload is refused (every format; PDFium "
        "aborts there, not in the server). Replaces CALYPSO_MAX_PARSE_MEMORY_BYTES, still read when this is unset.",
    )
    ingest_workers: int = Field(
        1,
        ge=0,
        description="Ingestion worker threads inside `calypso serve` (0: none in the background, for separate "
        "`calypso worker` processes on PostgreSQL; an upload with ?wait=true is still parsed by the request waiting).",
    )
    job_lease_seconds: float = Field(
        30.0,
        gt=0,
        description="How long a worker holds an ingestion job without renewing it (it renews every third of this); "
        "a worker that dies leaves its job to another after this long.",
    )
    job_poll_seconds: float = Field(1.0, gt=0, description="How often an idle ingestion worker looks for new jobs.")
    file_expiry_sweep_seconds: float = Field(
        60.0,
        gt=0,
        description="How often the server deletes the files whose Files API expires_after has passed "
        "(until then an expired file is already hidden from lists and answers 404).",
    )
    max_history_chars: int = Field(
        400_000,
        ge=1000,
        description="Longest conversation (previous_response_id history plus input) a Responses request may carry.",
    )
    max_request_bytes: int = Field(
        4 * 1024 * 1024,
        ge=1024,
        description="Largest accepted JSON request body, in bytes (uploads: max_upload_bytes).",
    )
    # What one document may expand into while parsing (413/422 past these): each bounds parser memory.
    max_document_chars: int = Field(
        20_000_000, ge=1, description="Most characters of text one document may yield (about 20,000 pages)."
    )
    max_document_pages: int = Field(10_000, ge=1, description="Most pages a PDF may have; checked before reading any.")
    max_uncompressed_bytes: int = Field(
        256 * 1024 * 1024,
        ge=1,
        description="Most bytes compressed content may expand to: a DOCX's zip members together, or one PDF stream.",
    )
    max_compression_ratio: int = Field(
        200,
        ge=1,
        description="Largest expansion ratio of a DOCX zip member or PDF stream over 1 MB (real files: under 50; bombs: ~1000).",
    )
    max_docx_elements: int = Field(
        1_000_000,
        ge=1,
        description="Most XML elements (paragraphs, runs, cells...) a DOCX or PPTX may hold; counted before parsing.",
    )
    max_sheet_cells: int = Field(
        1_000_000,
        ge=1,
        description="Most cells a spreadsheet (XLSX, CSV, TSV) may hold, empty formatted ones and merged spans "
        "included; counted while reading, so a sheet whose stated size lies is stopped there.",
    )
    max_email_attachments: int = Field(
        100,
        ge=0,
        description="Most attachments read from one e-mail (EML, MSG), those of messages inside it included; "
        "the others are named in its text as not read.",
    )
    # OCR of scans and images (ingest/ocr.py): only pages without a usable text layer, in the parse child.
    ocr_enabled: bool = Field(True, description="Recognise text in images and in PDF pages without a text layer.")
    ocr_max_pages: int = Field(
        300,
        ge=1,
        description="Most pages of one document that may need OCR (image frames, PDF pages without text); checked "
        "before recognising any.",
    )
    ocr_page_timeout_seconds: float = Field(
        120.0, gt=0, description="Longest the OCR of one page may take (a dense page: about 5 s on one free core)."
    )
    ocr_timeout_seconds: float = Field(
        1800.0,
        gt=0,
        description="Longest the OCR of one document may take in all; the parse time budget grows by this much "
        "for documents that may need OCR (PDFs and images).",
    )
    ocr_dpi: int = Field(150, ge=50, le=600, description="Resolution PDF pages are rendered at for OCR.")
    ocr_engine: Literal["auto", "paddle", "tesseract"] = Field(
        "auto",
        description="OCR engine: 'paddle' (PP-OCRv6 tiny, faster-paddle), 'tesseract' (Debian's tesseract-ocr), or "
        "'auto': PP-OCRv6, and Tesseract for a page whose script PP-OCRv6 reads badly (kana, Hangul...).",
    )
    ocr_languages: str = Field(
        "eng",
        description="Tesseract languages ('+'-separated, e.g. 'eng+deu') for pages Tesseract reads in Latin script; "
        "pages of other scripts add their own pack when installed (chi_sim, jpn, kor...).",
    )
    max_image_pixels: int = Field(
        100_000_000,
        ge=1,
        description="Most pixels one image (or one rendered page) may have; checked before decoding it.",
    )
    chunk_size: int = Field(
        1000, ge=100, description="Target chunk length in characters; chunks end on sentence boundaries."
    )
    chunk_overlap: int = Field(
        150, ge=0, description="Characters of trailing context repeated at the start of the next chunk."
    )
    search_max_results: int = Field(10, ge=1, le=100, description="Default number of passages returned by a search.")
    crawl_timeout_seconds: float = Field(15.0, gt=0, description="Timeout for fetching a crawled page.")
    crawl_allow_private: bool = Field(
        False, description="Allow crawling loopback and private-network addresses (off: refuses them, against SSRF)."
    )
    source_roots: str = Field(
        "",
        description="Directories (comma-separated) folder and local git sources may read; empty: none may be added.",
    )
    source_workers: int = Field(
        1, ge=0, description="Threads inside `calypso serve` that run source syncs (0: only `calypso worker` does)."
    )
    passage_count: int = Field(
        5, ge=1, le=MAX_PASSAGES, description="Passages retrieved and handed to the model per question."
    )
    generator: str = Field(
        "auto",
        description="Answer generator: 'extractive', 'upstream', or 'auto' (upstream when CALYPSO_LLM_BASE_URL is set).",
    )
    extractive_semantic_weight: float = Field(
        0.35,
        ge=0,
        le=1,
        description="Share of the embedding model's cosine in how the extractive answerer chooses sentences "
        "(the rest is the question's content words); 0: words only, no model call. Tuned on SciFact train "
        "claims (docs/benchmarks/answers.md, 'Extractive answers').",
    )
    llm_base_url: str | None = Field(None, description="OpenAI-compatible upstream, e.g. http://localhost:11434/v1.")
    llm_api_key: SecretStr | None = Field(None, description="Bearer key for the upstream, if it needs one.")
    llm_model: str | None = Field(None, description="Model name sent to the upstream.")
    llm_timeout_seconds: float = Field(60.0, gt=0, description="Upstream read timeout (between tokens), seconds.")
    llm_max_connections: int = Field(
        256,
        ge=1,
        description="Concurrent requests (streams) to the upstream model server; more wait for a free slot.",
    )
    llm_pool_timeout_seconds: float = Field(
        30.0,
        gt=0,
        description="Longest wait for a free upstream slot when all are busy; then 503 too_many_concurrent_requests.",
    )
    llm_max_retries: int = Field(
        2, ge=0, description="Retries on upstream 429/5xx/connect errors before the first token."
    )
    embedding_model: str = Field(
        "multilingual-e5-small-int8",
        description="Embedding model: a local one from the 'embed' extra ('multilingual-e5-small-int8', any "
        "language, a question in one finding passages in another; 'minilm-l6-v2-int8', English), the model "
        "name sent to CALYPSO_EMBEDDING_BASE_URL, or 'none' for keyword-only search.",
    )
    embedding_base_url: str | None = Field(
        None,
        description="OpenAI-compatible /v1/embeddings server (TEI, vLLM, Ollama, OpenAI), e.g. http://localhost:8081/v1.",
    )
    embedding_api_key: SecretStr | None = Field(
        None, description="Bearer key for the embeddings server, if it needs one."
    )
    embedding_languages: str = Field(
        "",
        description="Languages the embedding model covers, as ISO 639-1 codes ('en,de') or '*' for any. Empty: "
        "the model's own ('en' for minilm-l6-v2-int8; any for multilingual-e5-small-int8 and a server's model). Queries and knowledge bases in "
        "other languages are searched by keywords alone (docs/languages.md).",
    )
    embed_workers: int = Field(
        1,
        ge=0,
        le=16,
        description="Embedding worker threads inside `calypso serve` (0: only `calypso worker` processes embed); "
        "documents are keyword-searchable before their vectors are in.",
    )
    embedding_batch_size: int = Field(
        64,
        ge=1,
        le=2048,
        description="Texts per request to the embeddings server (the local model uses its measured batch of 4).",
    )
    pg_vector_search: Literal["memory", "hnsw"] = Field(
        "memory",
        description="PostgreSQL only: where passage vectors are searched. 'hnsw': in the database, through pgvector's "
        "HNSW index (an exact scan for namespaces too small for it); each API process holds no vectors. 'memory': "
        "every API process loads its namespaces' vectors and searches them exactly (1.5 KB per passage per process).",
    )
    pg_hnsw_ef_search: int = Field(
        400,
        ge=10,
        le=1000,
        description="PostgreSQL with pg_vector_search=hnsw: HNSW candidates per query (pgvector's hnsw.ef_search); "
        "more is slower and closer to exact. At 1M passages: recall@10 0.92 / 0.95 / 0.97 / 0.98 at 200 / 300 / "
        "400 / 600, a top 100 in 7.0 / 8.6 / 10.2 / 14.1 ms (docs/benchmarks/hybrid.md, session 18).",
    )
    ann_min_vectors: int = Field(
        50_000,
        ge=0,
        description="Vectors in a namespace from which its vector search takes candidates from an HNSW graph "
        "(usearch, built in the background; scores stay exact cosines); below it, or 0, search is exact "
        "(1.3 ms at 20k passages, 10.5-12 ms at 200k on an idle machine: docs/benchmarks/hybrid.md).",
    )
    support_semantic: bool = Field(
        False,
        description="Add the embedding model's cosine to the citation support score. Off: measured +0.4 macro-F1 "
        "on AttributionBench for 46-380 ms per cited segment on 2 cores (docs/benchmarks/answers.md).",
    )
    unsupported_citations: Literal["flag", "drop"] = Field(
        "flag",
        description="Citations whose passage scores below the support threshold: 'flag' or 'drop'.",
    )
    attribution: Literal["off", "fill", "verify"] = Field(
        "fill",
        description="Citations for sentences the model left without a marker: 'off', 'fill' (cite the best "
        "supporting passage when it clears the support threshold), or 'verify' (fill, and take out the model's own "
        "citations below the threshold, reporting them as unsupported). A bot's 'attribution' overrides it.",
    )
    support_threshold: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Support score below which a citation is unsupported (default: the scorer's calibrated threshold).",
    )
    auth: Literal["auto", "on", "off"] = Field(
        "auto",
        description="API keys required: 'on', 'off', or 'auto' (off only when serving on a loopback address).",
    )
    admin_key: SecretStr | None = Field(
        None, description="Key for the admin API (/v1/admin/*): creates and revokes workspace keys."
    )
    signing_secret: SecretStr | None = Field(
        None, description="HMAC secret for signed source links; empty: a random one kept in the data directory."
    )
    metrics_enabled: bool = Field(True, description="Serve Prometheus metrics at /metrics.")
    otlp_endpoint: str = Field(
        "",
        description="OpenTelemetry collector (OTLP/HTTP, e.g. http://127.0.0.1:4318): a span per request; needs the 'otel' extra.",
    )
    metrics_token: SecretStr | None = Field(
        None, description="Bearer token /metrics requires; empty: /metrics is open like /healthz (bind it privately)."
    )
    source_link_ttl_seconds: int = Field(86400, ge=60, description="How long a signed source link stays valid.")
    bots_file: Path | None = Field(None, description="TOML file declaring bots, loaded at start.")
    public_base_url: str = Field(
        "",
        description="Base URL clients reach this server at (for source links behind a proxy); empty: the request's own.",
    )
    mcp_allowed_hosts: str = Field(
        "",
        description="Host names (comma-separated) MCP clients reach /mcp by, besides loopback, the bind address and "
        "the public URL's host: other Host headers are refused (DNS rebinding). On a 0.0.0.0 bind with none set, "
        "Host is not checked.",
    )
    mcp_allowed_origins: str = Field(
        "",
        description="Browser origins (comma-separated, e.g. https://app.example.com) allowed to call /mcp, besides "
        "loopback and the public URL's.",
    )
    demo: bool = Field(False, description="Ingest the bundled demo documents into an empty knowledge base at start.")
    log_level: str = Field("info", description="Server log level.")

    @model_validator(mode="before")
    @classmethod
    def _deprecated_names(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for old, name in DEPRECATED_ENV.items():
            value = os.environ.get(old)
            if value is None or name in data or f"CALYPSO_{name.upper()}" in os.environ:
                continue
            if value.strip() in ("", "0"):  # it meant "PDFs in the server": CALYPSO_PARSE_PROCESSES=0 now
                log.warning("%s=%s is ignored (deprecated); parsing stays in child processes", old, value)
                continue
            log.warning("%s is deprecated: set CALYPSO_%s instead", old, name.upper())
            data = {**data, name: value}
        return data

    @field_validator("generator")
    @classmethod
    def _known_generator(cls, value: str) -> str:
        # Imported here: the registry pulls in the generators (httpx, the extractive answerer).
        from calypso.generation import registry

        names = ["auto", *registry.available()]
        if value not in names:
            raise ValueError(f"unknown generator {value!r}; use one of: {', '.join(names)}")
        return value

    @field_validator("database_url")
    @classmethod
    def _postgres_url(cls, value: str) -> str:
        value = value.strip()
        if value and not value.startswith(("postgresql://", "postgres://")):
            raise ValueError("expected a postgresql://user:password@host:5432/database URL, or empty for SQLite")
        return value

    @field_validator("embedding_languages")
    @classmethod
    def _language_codes(cls, value: str) -> str:
        codes = [code.strip().lower() for code in value.split(",") if code.strip()]
        if value.strip() in ("", "*", "any", "all") or all(re.fullmatch("[a-z]{2,3}", c) for c in codes):
            return value
        raise ValueError("expected ISO 639-1 codes separated by commas ('en,de,zh'), '*' for any language, or empty")

    @property
    def database_path(self) -> Path:
        return self.home / DATABASE_FILE

    def namespace_or_default(self, namespace: str | None) -> str:
        """The namespace a request named, or the default one: the one place a missing namespace is filled in."""
        return namespace or self.default_namespace


def settings_table() -> list[tuple[str, str, str]]:
    """(environment variable, default, help) for every setting."""
    rows = []
    for name, field in Settings.model_fields.items():
        default = field.default_factory() if field.default_factory is not None else field.default  # type: ignore[call-arg]
        rows.append((f"CALYPSO_{name.upper()}", _shown(default), field.description or ""))
    return rows


def _shown(default: object) -> str:
    """A default as it would be written in the environment: ``(empty)`` for none, booleans as true/false."""
    if default is None or default == "":
        return "(empty)"
    if isinstance(default, bool):
        return "true" if default else "false"
    return str(default)


def settings_problems(exc: ValidationError) -> list[str]:
    """One line per invalid setting, named as its environment variable: what `calypso` prints at start."""
    lines = []
    for error in exc.errors():
        name = "CALYPSO_" + "_".join(str(part) for part in error["loc"]).upper()
        message = str(error["msg"]).removeprefix("Value error, ")
        if name == "CALYPSO_DATABASE_URL":  # it may hold a password: never echoed
            lines.append(f"{name}: {message}.")
            continue
        lines.append(f"{name}={error.get('input')!r}: {message}.")
    return lines


def revealed(secret: SecretStr | None) -> str | None:
    """A secret setting's value, where it is used (it prints as '**********' everywhere else)."""
    return secret.get_secret_value() if secret is not None else None
