"""Generator backends by name: ``register(name, factory)``, ``create(name, **options)``.

Built-in: "upstream" (an OpenAI-compatible server; options are the fields of
``UpstreamConfig``, or ``config=UpstreamConfig(...)``, plus optional
``client=httpx.AsyncClient``). "extractive" (the built-in answerer, no options).
Extensions register the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from calypso.generation.base import Generator
from calypso.generation.extractive import ExtractiveGenerator
from calypso.generation.upstream import UpstreamConfig, UpstreamGenerator

_factories: dict[str, Callable[..., Generator]] = {}


def register(name: str, factory: Callable[..., Generator]) -> None:
    """Make ``create(name, **options)`` call ``factory(**options)``; a later registration replaces an earlier one."""
    _factories[name] = factory


def create(name: str, **options: Any) -> Generator:
    try:
        factory = _factories[name]
    except KeyError:
        raise LookupError(f"Unknown generator {name!r}; available: {', '.join(available()) or 'none'}.") from None
    return factory(**options)


def available() -> list[str]:
    return sorted(_factories)


def _upstream(config: UpstreamConfig | None = None, client: Any = None, **fields: Any) -> UpstreamGenerator:
    return UpstreamGenerator(config if config is not None else UpstreamConfig(**fields), client=client)


register("upstream", _upstream)
register("extractive", ExtractiveGenerator)
