"""The playground names CJK-capable faces, so Chinese, Japanese and Korean answers render (issue 22)."""

from __future__ import annotations

import re
from importlib import resources


def test_the_body_font_stack_names_cjk_faces_before_the_generic_family() -> None:
    css = resources.files("calypso.playground").joinpath("static", "playground.css").read_text("utf-8")
    stack = re.search(r"font-family: (system-ui[^;]*);", css)
    assert stack is not None
    faces = [face.strip().strip('"') for face in stack.group(1).split(",")]
    assert faces[-1] == "sans-serif"
    for cjk in ("Noto Sans CJK SC", "PingFang SC", "Microsoft YaHei", "Hiragino Sans", "Malgun Gothic"):
        assert cjk in faces[:-1], cjk


def test_the_passage_viewer_names_the_same_cjk_faces() -> None:
    from calypso.viewer.html_page import _STYLE

    stack = re.search(r"font-family: (system-ui[^;]*);", _STYLE)
    assert stack is not None
    faces = [face.strip().strip('"') for face in stack.group(1).replace("\n", " ").split(",")]
    assert faces[-1] == "sans-serif"
    for cjk in ("Noto Sans CJK SC", "PingFang SC", "Microsoft YaHei", "Hiragino Sans", "Malgun Gothic"):
        assert cjk in faces[:-1], cjk
