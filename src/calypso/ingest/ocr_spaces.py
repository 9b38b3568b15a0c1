"""The spaces the recogniser drops: PP-OCRv4 often runs the words of a long line together ("theBrennerPass").

The line's image says where its words part: runs of blank columns well wider than the line's letter gaps
(its median blank run) and than a fraction of its height. The recogniser says where each character stands (its CTC column: 8 model pixels, the line scaled
to 48 pixels high). A space goes between two characters that a blank run separates.
"""

from __future__ import annotations

import numpy as np

_MODEL_HEIGHT = 48  # the recogniser's input height (rec_img_shape)
_COLUMN = 8  # model pixels per output column
# A blank run this share of the line's height wide parts two words; letters stand closer.
GAP_SHARE = 0.16
LETTER_GAP_TIMES = 1.8


def word_gaps(crop: np.ndarray) -> list[float]:
    """Centres (in crop pixels) of the blank runs of ``crop`` (a line image) wide enough to part words."""
    grey = crop.mean(axis=2) if crop.ndim == 3 else crop.astype(np.float32)
    height = grey.shape[0]
    dark, light = np.percentile(grey, 5), np.percentile(grey, 90)
    if light - dark < 30:  # no contrast: nothing to go by
        return []
    ink = (grey < (dark + light) / 2).sum(axis=0)
    blank = ink <= max(1, int(0.04 * height))
    runs: list[tuple[int, int]] = []  # (start, end) of the blank runs between inked columns
    start = None
    for x, empty in enumerate(np.append(blank, False)):
        if empty and start is None:
            start = x
        elif not empty and start is not None:
            if start > 0 and x < len(blank):  # not the margins
                runs.append((start, x))
            start = None
    if not runs:
        return []
    # Letters part by the common (median) run: a word gap is well wider than that, and than GAP_SHARE of the height.
    widths = [end - begin for begin, end in runs]
    wide = max(2.0, GAP_SHARE * height, LETTER_GAP_TIMES * float(np.median(widths)))
    return [(begin + end - 1) / 2 for begin, end in runs if end - begin >= wide]


def restore_spaces(
    text: str, columns: list[int], confidences: list[float], crop: np.ndarray
) -> tuple[str, list[float]]:
    """``text`` with a space wherever a blank run of ``crop`` falls between two characters; the confidences
    follow (an inserted space takes its left neighbour's)."""
    if len(columns) != len(text) or len(text) < 2:
        return text, confidences
    gaps = word_gaps(crop)
    if not gaps:
        return text, confidences
    scale = crop.shape[0] / _MODEL_HEIGHT
    centres = [(column + 0.5) * _COLUMN * scale for column in columns]
    chars: list[str] = [text[0]]
    confs: list[float] = [confidences[0]] if confidences else []
    gap_index = 0
    for i in range(1, len(text)):
        while gap_index < len(gaps) and gaps[gap_index] < centres[i - 1]:
            gap_index += 1
        parted = gap_index < len(gaps) and gaps[gap_index] < centres[i]
        # Digits stay together: a figure's wide digits ("1 2") part less often than they seem to.
        digits = text[i].isdigit() and text[i - 1].isdigit()
        if parted and not digits and not text[i].isspace() and not text[i - 1].isspace():
            chars.append(" ")
            if confs:
                confs.append(confs[-1])
        chars.append(text[i])
        if confidences:
            confs.append(confidences[i] if i < len(confidences) else confs[-1])
    return "".join(chars), confs
