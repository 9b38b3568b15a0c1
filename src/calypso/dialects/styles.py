"""How markers are shown: the bot's marker style, and the rendering style a request ends up with.

A bot chooses ``numeric`` (``[n]`` display numbers and a "Sources:" appendix)
or ``source`` (``[Source N]`` retrieval numbers, no appendix). A sources
policy can override either with ``hidden``: no markers and no sources at all. A structured (JSON)
reply is ``plain``: no markers, no appendix, its sources beside the content.
"""

from __future__ import annotations

from typing import Final, Literal

MarkerStyle = Literal["numeric", "source"]
RenderStyle = Literal["numeric", "source", "hidden", "plain"]

NUMERIC: Final = "numeric"
SOURCE: Final = "source"
HIDDEN: Final = "hidden"  # a sources policy, not a bot style: no markers, no sources anywhere
# A JSON reply (response_format), not a bot style: the content exactly as the model wrote it, without
# markers or appendix, and no inline annotations; its sources are in ``citations``.
PLAIN: Final = "plain"


def style_for(marker_style: MarkerStyle, sources_hidden: bool) -> RenderStyle:
    """The rendering style: the bot's marker style, unless a policy hides sources."""
    return HIDDEN if sources_hidden else marker_style
