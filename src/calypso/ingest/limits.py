"""How much a parser may expand one document into, and the errors for going past it.

The limits are settings (``CALYPSO_MAX_DOCUMENT_CHARS`` ...); ``ParseLimits`` carries them to the
parsers so the parsers stay free of configuration. A limit error names its setting and says how
to get under it.
"""

from __future__ import annotations

from dataclasses import dataclass

from calypso.config import Settings
from calypso.errors import PayloadTooLarge, UnprocessableDocument


def _default(name: str) -> int:
    value: int = Settings.model_fields[name].default
    return value


def _default_float(name: str) -> float:
    value: float = Settings.model_fields[name].default
    return value


@dataclass(frozen=True)
class ParseLimits:
    max_document_chars: int = _default("max_document_chars")
    max_document_pages: int = _default("max_document_pages")
    max_uncompressed_bytes: int = _default("max_uncompressed_bytes")
    max_compression_ratio: int = _default("max_compression_ratio")
    max_docx_elements: int = _default("max_docx_elements")
    max_sheet_cells: int = _default("max_sheet_cells")
    chunk_size: int = _default("chunk_size")  # not a limit: spreadsheet blocks are cut to fit one passage
    max_email_attachments: int = _default("max_email_attachments")
    max_image_pixels: int = _default("max_image_pixels")
    ocr_enabled: bool = bool(_default("ocr_enabled"))
    ocr_max_pages: int = _default("ocr_max_pages")
    ocr_page_timeout_seconds: float = _default_float("ocr_page_timeout_seconds")
    ocr_timeout_seconds: float = _default_float("ocr_timeout_seconds")
    ocr_dpi: int = _default("ocr_dpi")
    ocr_engine: str = str(Settings.model_fields["ocr_engine"].default)
    ocr_languages: str = str(Settings.model_fields["ocr_languages"].default)

    @classmethod
    def from_settings(cls, settings: Settings) -> ParseLimits:
        return cls(**{name: getattr(settings, name) for name in cls.__dataclass_fields__})

    def check_chars(self, count: int, filename: str) -> None:
        if count > self.max_document_chars:
            raise too_large(
                f"{filename!r} holds at least {count:,} characters of text",
                self,
                "max_document_chars",
                "too_many_characters",
            )


DEFAULT_LIMITS = ParseLimits()

# A DOCX has a few dozen zip members; zipfile keeps an object per member (about 500 bytes each).
MAX_ZIP_MEMBERS = 10_000

# Below this many bytes a high compression ratio is harmless (a page of blanks compresses 1000:1).
RATIO_FLOOR_BYTES = 1 << 20


def too_large(what: str, limits: ParseLimits, setting: str, code: str) -> PayloadTooLarge:
    """413 for a document past a size limit: ``what`` says by how much, ``setting`` names the field."""
    return PayloadTooLarge(
        f"{what}; the limit is {getattr(limits, setting):,} (setting CALYPSO_{setting.upper()}). Split the document "
        "into smaller files and upload them separately, or ask the operator to raise the limit.",
        param="file",
        code=code,
    )


def suspicious_ratio(filename: str, part: str, expanded: int, compressed: int, limit: int) -> UnprocessableDocument:
    """422 for a part that expands far more than real documents do: the shape of a decompression bomb."""
    return UnprocessableDocument(
        f"{filename!r} looks like a decompression bomb: {part} expands {expanded // max(compressed, 1):,} times "
        f"({compressed:,} bytes to {expanded:,}), more than the {limit:,} times real documents reach "
        "(setting CALYPSO_MAX_COMPRESSION_RATIO). Re-save the file in its editor and upload it again.",
        param="file",
        code="compression_ratio",
    )
