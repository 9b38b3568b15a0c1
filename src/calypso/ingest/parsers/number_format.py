"""A spreadsheet value as its cell shows it: Excel number formats, the common part of them.

Covered: "General" (no float noise: 0.1 + 0.2 shows 0.3), decimals and thousands separators
(``#,##0.00``), percent, scientific, literal text and escapes (``"CHF "0``, ``\\(0\\)``), the sections for
negative numbers and zero (``#,##0;(#,##0);"—"`` shows -81 as "(81)" and 0 as "—"), dates and times in
ISO form. Not covered (shown as General instead): fractions (``# ?/?``), conditions (``[>100]``),
locale-specific calendars. Padding (``_)``) and fill (``*``) characters only align columns on screen and
are dropped.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import re

_BRACKETS = re.compile(r"\[[^\]]*\]")
_CURRENCY = re.compile(r"\[\$([^\]-]*)(?:-[^\]]*)?\]")
_DIGITS = re.compile(r"[0#?][0#?,.]*(?:[eE][+-][0#?]+)?|\.[0#?]+(?:[eE][+-][0#?]+)?")


@functools.lru_cache(maxsize=256)
def _sections(number_format: str) -> list[str]:
    """The ";"-separated sections of a format (positive; negative; zero; text), quotes and escapes respected."""
    sections, current, quoted, index = [], [], False, 0
    while index < len(number_format):
        ch = number_format[index]
        if ch == "\\" and not quoted:
            current.append(number_format[index : index + 2])
            index += 2
            continue
        if ch == '"':
            quoted = not quoted
        if ch == ";" and not quoted:
            sections.append("".join(current))
            current = []
        else:
            current.append(ch)
        index += 1
    sections.append("".join(current))
    return sections


def general(value: float) -> str:
    """What Excel's General format shows: integers whole, other numbers to 11 significant digits."""
    value = float(value)
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    text = f"{value:.11g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}E{exponent[0]}{exponent[1:].lstrip('0').rjust(2, '0')}"
    return text


def _literal(piece: str) -> str:
    """The text a format shows around its digits: quoted strings and escapes kept, padding and fill dropped."""
    piece = _CURRENCY.sub(lambda m: m.group(1), piece)
    piece = _BRACKETS.sub("", piece)
    out: list[str] = []
    index = 0
    while index < len(piece):
        ch = piece[index]
        if ch == '"':
            close = piece.find('"', index + 1)
            close = len(piece) if close < 0 else close
            out.append(piece[index + 1 : close])
            index = close + 1
            continue
        if ch == "\\" and index + 1 < len(piece):
            out.append(piece[index + 1])
            index += 2
            continue
        if ch in "_*" and index + 1 < len(piece):
            index += 2  # "_)": a space as wide as ")"; "*-": repeat "-" to fill the cell
            continue
        if ch not in "@":
            out.append(ch)
        index += 1
    return "".join(out)


def _digits(value: float, pattern: str) -> str:
    """``value`` (not negative) written by a digit pattern such as ``#,##0.00`` or ``0.0E+00``."""
    mantissa, _, exponent = pattern.upper().partition("E")
    integer, _, fraction = mantissa.partition(".")
    decimals = sum(fraction.count(ch) for ch in "0#?")
    scale = len(integer) - len(integer.rstrip(","))  # trailing commas divide by 1000 each
    value /= 1000**scale
    if exponent:
        return f"{value:.{decimals}E}"
    grouping = "," if "," in integer.rstrip(",") else ""
    text = f"{value:{grouping}.{decimals}f}"
    if fraction and "0" not in fraction and "." in text:  # "#.##": optional decimals
        text = text.rstrip("0").rstrip(".")
    if integer.strip(",") and "0" not in integer and text.startswith("0"):  # "#.00" writes .5, not 0.5
        text = text[1:] or "0"
    return text


def format_number(value: float, number_format: str) -> str:
    """``value`` as a cell with ``number_format`` shows it (General where the format is not understood)."""
    value = float(value)
    if math.isnan(value) or math.isinf(value):
        return str(value)
    sections = _sections(number_format or "General")
    if value < 0 and len(sections) > 1:
        section, value = sections[1], -value
    elif value == 0 and len(sections) > 2:
        section = sections[2]
    else:
        section = sections[0]
    if _BRACKETS.sub("", section).strip().lower() in ("general", ""):
        return general(value) if section == sections[0] or value else _literal(section)
    if "?/" in section or re.search(r"\[[<>=]", section):
        return general(value if section == sections[0] else -value)
    plain = re.sub(r'"[^"]*"|\\.|_.|\*.|\[[^\]]*\]', lambda m: " " * len(m.group(0)), section)
    match = _DIGITS.search(plain)
    if match is None:
        # "@" is the text format, which shows a number as General; else a section of text only ("—" for zero)
        return general(value) if "@" in plain else _literal(section)
    if "%" in plain:
        value *= 100
    return _literal(section[: match.start()]) + _digits(value, match.group(0)) + _literal(section[match.end() :])


def format_value(value: object, number_format: str) -> tuple[str, bool]:
    """(text as shown, whether it is a number or date) for a cell value openpyxl read."""
    if isinstance(value, bool):
        return ("TRUE" if value else "FALSE"), False
    if isinstance(value, int | float):
        return format_number(float(value), number_format), True
    if isinstance(value, dt.datetime):
        if value.time() == dt.time(0):
            return value.date().isoformat(), True
        return value.isoformat(sep=" ", timespec="seconds"), True
    if isinstance(value, dt.date | dt.time):
        return value.isoformat(), True
    if isinstance(value, dt.timedelta):
        return str(value), True
    return str(value), False
