"""How markers are shown: the bot's marker style, and the rendering style a request ends up with.

A bot chooses ``numeric`` (``[n]`` display numbers and a "Sources:" appendix)
or ``source`` (``[Source N]`` retrieval numbers, no appendix). A sources
policy can override either with ``hidden``: no markers and no sources at all.
"""

from __future__ import annotations

from typing import Final, Literal

MarkerStyle = Literal["numeric", "source"]
RenderStyle = Literal["numeric", "source", "hidden"]

NUMERIC: Final = "numeric"
SOURCE: Final = "source"
HIDDEN: Final = "hidden"  # a sources policy, not a bot style: no markers, no sources anywhere


def style_for(marker_style: MarkerStyle, sources_hidden: bool) -> RenderStyle:
    """The rendering style: the bot's marker style, unless a policy hides sources."""
    return HIDDEN if sources_hidden else marker_style
