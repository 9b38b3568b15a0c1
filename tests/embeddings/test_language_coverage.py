"""An embedding model declares its languages: vectors join the search only where it covers them.

The bundled MiniLM covers English; a multilingual model behind an OpenAI-compatible /v1/embeddings
server (bge-m3, multilingual-e5) covers any language. The server here is the one the tests always start,
serving a crude but real multilingual embedding: hashed character bigrams.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence

import numpy as np
import pytest

from calypso.config import Settings
from calypso.embeddings.local_onnx import LocalOnnxEmbedder
from calypso.embeddings.serve_embeddings import EmbeddingsServer
from calypso.services import open_services
from calypso.services.embed_worker import embed_all
from calypso.services.ingestion import Upload

ZH = [
    "客户可在购买后30天内申请全额退款，退款将在五个工作日内退回原支付方式。",
    "礼品卡一律不予退款，也不能兑换现金。",
    "标准运费为每单十元，订单满两百元免运费。",
]
QUESTION = "礼品卡可以退款吗？"


class CharBigramEmbedder:
    """Hashed character bigrams: language-blind, so it 'covers' Chinese as well as anything."""

    name = "char-bigrams-64"
    dimension = 64
    languages = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            for a, b in zip(text, text[1:]):
                out[row, hashlib.sha256((a + b).encode()).digest()[0] % 64] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


@pytest.fixture
def server() -> Iterator[EmbeddingsServer]:
    with EmbeddingsServer(CharBigramEmbedder(), model="multilingual-test") as running:
        yield running


def _search(settings: Settings) -> list[float | None]:
    services = open_services(settings)
    try:
        for n, text in enumerate(ZH):
            services.ingestion.ingest(Upload(text.encode(), f"zh{n}.txt", "general"))
        embed_all(services.vectors)
        passages = services.search.search(QUESTION, services.search.scope("general"))
        assert passages and "礼品卡" in passages[0].chunk.text
        return [p.vector_score for p in passages]
    finally:
        services.close()


def test_a_multilingual_model_behind_a_server_joins_chinese_search(
    settings: Settings, server: EmbeddingsServer
) -> None:
    scores = _search(
        settings.model_copy(update={"embedding_model": "multilingual-test", "embedding_base_url": server.base_url})
    )
    assert any(score is not None for score in scores)  # hybrid: the vector run took part


def test_a_model_declared_english_only_leaves_chinese_to_keywords(settings: Settings, server: EmbeddingsServer) -> None:
    update = {
        "embedding_model": "multilingual-test",
        "embedding_base_url": server.base_url,
        "embedding_languages": "en",
    }
    assert all(score is None for score in _search(settings.model_copy(update=update)))


def test_the_bundled_model_covers_english_only(settings: Settings, minilm: LocalOnnxEmbedder) -> None:
    assert minilm.languages == frozenset({"en"})
    assert all(score is None for score in _search(settings.model_copy(update={"embedding_model": "minilm-l6-v2-int8"})))


def test_a_malformed_languages_setting_is_refused_at_start() -> None:
    from pydantic import ValidationError

    from calypso.config import settings_problems

    assert Settings(embedding_languages="en, de").embedding_languages == "en, de"
    with pytest.raises(ValidationError) as refused:
        Settings(embedding_languages="en;de")
    assert settings_problems(refused.value) == [
        "CALYPSO_EMBEDDING_LANGUAGES='en;de': expected ISO 639-1 codes separated by commas ('en,de,zh'), "
        "'*' for any language, or empty."
    ]
