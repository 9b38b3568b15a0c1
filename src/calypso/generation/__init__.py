"""LLM backends behind one contract (``base``); pick one by name through ``registry``."""

from calypso.generation.base import (
    Finish,
    GenerationEvent,
    GenerationRequest,
    Generator,
    TextDelta,
    ToolCalls,
    Usage,
)

__all__ = ["Finish", "GenerationEvent", "GenerationRequest", "Generator", "TextDelta", "ToolCalls", "Usage"]
