"""OpenAI's ``ranking_options``, on the ``file_search`` tool of ``/v1/responses`` and on ``POST /v1/search``.

The wire shape follows openai-python's ``FileSearchTool.RankingOptions`` (``ranker`` ``auto`` or
``default-2024-11-15``) and ``VectorStoreSearchParams.RankingOptions`` (which also allows ``none``).
Calypso has one ranker, so ``ranker`` is accepted and checked but changes nothing. ``score_threshold``
(0..1) drops passages scoring below it; ``hybrid_search`` weights the keyword and vector runs of hybrid
retrieval (``retrieval.hybrid.fuse``); keyword-only search (no embedding model) has nothing to weigh.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from calypso.models import RankingOptions

# Strict: a number, not a numeric string or a boolean; an int is a number.
Weight = Annotated[float, Field(ge=0, strict=True, allow_inf_nan=False)]
Threshold = Annotated[float, Field(ge=0, le=1, strict=True, allow_inf_nan=False)]


class HybridSearch(BaseModel):
    """Weights of the text (keyword) and embedding runs in hybrid fusion."""

    # At least one weight positive, in the schema too (``_not_both_zero``).
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "anyOf": [
                {"properties": {"embedding_weight": {"exclusiveMinimum": 0}}},
                {"properties": {"text_weight": {"exclusiveMinimum": 0}}},
            ]
        },
    )
    embedding_weight: Weight
    text_weight: Weight

    @model_validator(mode="after")
    def _not_both_zero(self) -> HybridSearch:
        if self.embedding_weight == 0 and self.text_weight == 0:
            raise ValueError("embedding_weight and text_weight are both 0; give at least one a positive weight")
        return self


class FileSearchRankingOptions(BaseModel):
    """``tools[].ranking_options`` of ``/v1/responses``."""

    model_config = ConfigDict(extra="forbid")
    ranker: Literal["auto", "default-2024-11-15"] | None = None
    score_threshold: Threshold | None = None
    hybrid_search: HybridSearch | None = None

    def to_options(self) -> RankingOptions:
        hybrid = self.hybrid_search
        return RankingOptions(
            score_threshold=self.score_threshold or 0.0,
            text_weight=hybrid.text_weight if hybrid else None,
            embedding_weight=hybrid.embedding_weight if hybrid else None,
        )


class SearchRankingOptions(FileSearchRankingOptions):
    """``ranking_options`` of ``POST /v1/search``: OpenAI's vector store search also accepts ranker ``none``."""

    ranker: Literal["none", "auto", "default-2024-11-15"] | None = None  # type: ignore[assignment]
