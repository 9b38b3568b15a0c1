"""Text files that are not clean UTF-8 (issue 26): a stray byte spoils one character, not the file, and
other encodings are detected (charset-normalizer) rather than assumed to be Windows-1252."""

from __future__ import annotations

import pytest

from calypso.ingest.parsers import detect_and_parse

FRENCH = "Le café est servi avec une crème brûlée.\nÇa coûte 5 €, déjà payé.\n"


def _text(data: bytes, name: str = "notes.txt") -> str:
    parsed, _ = detect_and_parse(data, name)
    return parsed.text


def test_one_invalid_byte_in_utf8_is_replaced_and_the_rest_kept() -> None:
    data = FRENCH.encode() + b"Une ligne abim\xe9e.\n" + FRENCH.encode()
    text = _text(data)
    assert text.count("Le café est servi") == 2 and "Ã" not in text
    assert "Une ligne abim\ufffde." in text


def test_a_few_invalid_bytes_in_markdown_are_replaced_too() -> None:
    data = ("# Menu\n\n" + FRENCH * 20).encode() + b"\x80\x81\n"
    text = _text(data, "menu.md")
    assert "crème brûlée" in text and "Ã" not in text


@pytest.mark.parametrize(
    ("text", "encoding"),
    [
        ("Привет! Это проверка кодировки: файл сохранён в Windows-1251.", "cp1251"),
        ("こんにちは。これは日本語の文章で、シフトJISで保存されています。", "shift_jis"),
        (FRENCH, "cp1252"),
        ("Grüße aus München: schöne Straße, große Äpfel.", "cp1252"),
    ],
)
def test_other_encodings_are_detected(text: str, encoding: str) -> None:
    assert _text(text.encode(encoding)) == text.strip("\n")


def test_a_genuine_replacement_character_is_not_counted_as_a_bad_byte() -> None:
    data = ("\ufffd" * 10 + " ascii").encode() + b"\xe9"
    assert _text(data) == "\ufffd" * 10 + " ascii\ufffd"
