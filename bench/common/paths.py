"""Where the repository and the evaluation data are."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def data_dir() -> Path:
    path = Path(os.environ.get("CALYPSO_EVAL_DATA", REPO.parent / "shared" / "data"))
    if not path.is_dir():
        raise SystemExit(f"evaluation data not found at {path}; set CALYPSO_EVAL_DATA")
    return path
