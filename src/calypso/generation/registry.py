"""Generator backends by name: ``register(name, factory)``, ``create(name, **options)``.

Built-in: "upstream" (an OpenAI-compatible server; options are the fields of
``UpstreamConfig``, or ``config=UpstreamConfig(...)``, plus optional
``client=httpx.AsyncClient`` and ``slots=UpstreamSlots``, a concurrency bound shared between generators). "extractive" (the built-in answerer; optional ``similarity``, a
``SentenceSimilarity`` such as ``generation.similarity.EmbeddingSimilarity``, and ``semantic_weight``).
Extensions register the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from calypso.errors import UnknownGenerator
from calypso.generation.base import Generator
from calypso.generation.extractive import ExtractiveGenerator
from calypso.generation.slots import UpstreamSlots
from calypso.generation.upstream import UpstreamConfig, UpstreamGenerator

_factories: dict[str, Callable[..., Generator]] = {}


def register(name: str, factory: Callable[..., Generator]) -> None:
    """Make ``create(name, **options)`` call ``factory(**options)``; a later registration replaces an earlier one."""
    _factories[name] = factory


def unregister(name: str) -> None:
    """Forget a registration (tests, and extensions that unload); unknown names are ignored."""
    _factories.pop(name, None)


def create(name: str, **options: Any) -> Generator:
    """A new generator; ``UnknownGenerator`` (a 400 and a ``LookupError``) when ``name`` is not registered."""
    try:
        factory = _factories[name]
    except KeyError:
        raise UnknownGenerator(
            f"Unknown generator {name!r}; this server has: {', '.join(available()) or 'none'}. "
            "Set the bot's generator to one of them, or to null for the server default "
            "(PATCH /v1/bots/{id}), or fix CALYPSO_GENERATOR."
        ) from None
    return factory(**options)


def available() -> list[str]:
    return sorted(_factories)


def _upstream(
    config: UpstreamConfig | None = None, client: Any = None, slots: UpstreamSlots | None = None, **fields: Any
) -> UpstreamGenerator:
    return UpstreamGenerator(config if config is not None else UpstreamConfig(**fields), client=client, slots=slots)


register("upstream", _upstream)
register("extractive", ExtractiveGenerator)
