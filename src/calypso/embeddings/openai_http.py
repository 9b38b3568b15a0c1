"""Any OpenAI-compatible ``POST /v1/embeddings`` endpoint: TEI, vLLM, Ollama, llama.cpp, OpenAI.

Texts go in batches of ``batch_size``; each reply's ``data[i].index`` puts rows back
in input order; rows are normalised here (not every server does). The dimension is
learnt from the first reply (or given). Errors say what to change: a 401 names the
key setting, a 404 the model or URL, a connection failure the base URL.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np

from calypso.embeddings.base import EmbeddingError, normalise

RETRY_STATUSES = {429, 500, 502, 503, 504}


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible server; ``name`` is ``openai:<model>``."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        batch_size: int = 64,
        dimension: int | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        transport: httpx.BaseTransport | None = None,
        languages: frozenset[str] | None = None,
    ) -> None:
        """``languages``: what the served model covers (None: any; bge-m3, multilingual-e5, OpenAI's models)."""
        self.base_url = base_url.rstrip("/")
        self._languages = languages
        self.model = model
        self.batch_size = max(1, batch_size)
        self.max_retries = max_retries
        self._dimension = dimension
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout, transport=transport)

    @property
    def name(self) -> str:
        return f"openai:{self.model}"

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self.embed(["dimension probe"])
        assert self._dimension is not None
        return self._dimension

    @property
    def languages(self) -> frozenset[str] | None:
        return self._languages

    def close(self) -> None:
        self._client.close()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        parts = [self._batch(list(texts[i : i + self.batch_size])) for i in range(0, len(texts), self.batch_size)]
        if not parts:
            return np.zeros((0, self._dimension or 0), dtype=np.float32)
        return np.concatenate(parts)

    def _batch(self, texts: list[str]) -> np.ndarray:
        body = self._post({"model": self.model, "input": texts, "encoding_format": "float"})
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list) or len(data) != len(texts):
            got = len(data) if isinstance(data, list) else "no"
            raise EmbeddingError(
                f"{self.base_url}/embeddings answered {got} embeddings for {len(texts)} inputs; "
                "is CALYPSO_EMBEDDING_BASE_URL an OpenAI-compatible embeddings server?"
            )
        rows: list[Any] = [None] * len(texts)
        for pos, item in enumerate(data):
            index = item.get("index", pos) if isinstance(item, dict) else pos
            vector = item.get("embedding") if isinstance(item, dict) else None
            if not isinstance(index, int) or not 0 <= index < len(texts) or not isinstance(vector, list):
                raise EmbeddingError(f"{self.base_url}/embeddings answered a malformed item at position {pos}.")
            rows[index] = vector
        dims = {len(r) for r in rows}
        if len(dims) != 1 or 0 in dims:
            raise EmbeddingError(f"{self.base_url}/embeddings answered vectors of differing lengths {sorted(dims)}.")
        (dim,) = dims
        if self._dimension is None:
            self._dimension = dim
        elif dim != self._dimension:
            raise EmbeddingError(
                f"Model {self.model!r} at {self.base_url} answered {dim}-dimensional vectors, expected "
                f"{self._dimension}: the server's model changed; run `calypso reindex` after changing models."
            )
        return normalise(np.asarray(rows, dtype=np.float32))

    def _post(self, payload: dict[str, Any]) -> Any:
        url = f"{self.base_url}/embeddings"
        for attempt in range(self.max_retries + 1):
            try:
                reply = self._client.post("/embeddings", json=payload)
            except httpx.TimeoutException as exc:
                if attempt < self.max_retries:
                    continue
                raise EmbeddingError(f"{url} did not answer in time ({exc!r}); check the server's load.") from exc
            except httpx.HTTPError as exc:
                if attempt < self.max_retries:
                    time.sleep(0.2 * (attempt + 1))
                    continue
                raise EmbeddingError(
                    f"Cannot reach the embeddings server at {url} ({exc}); check CALYPSO_EMBEDDING_BASE_URL."
                ) from exc
            if reply.status_code in RETRY_STATUSES and attempt < self.max_retries:
                time.sleep(min(float(reply.headers.get("retry-after", 0.2 * (attempt + 1)) or 0.2), 5.0))
                continue
            if reply.status_code >= 400:
                raise EmbeddingError(self._explain(reply))
            try:
                return reply.json()
            except ValueError as exc:
                raise EmbeddingError(f"{url} answered non-JSON ({reply.text[:80]!r}).") from exc
        raise AssertionError("unreachable")

    def _explain(self, reply: httpx.Response) -> str:
        try:
            detail = reply.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            detail = reply.text[:200]
        url = f"{self.base_url}/embeddings"
        if reply.status_code in (401, 403):
            hint = "set CALYPSO_EMBEDDING_API_KEY to a key the server accepts"
        elif reply.status_code == 404:
            hint = f"check CALYPSO_EMBEDDING_BASE_URL (ending in /v1) and that the server serves model {self.model!r}"
        elif reply.status_code in (400, 413, 422):
            hint = "the server refused the batch; try a smaller CALYPSO_EMBEDDING_BATCH_SIZE"
        else:
            hint = "the server failed; see its log"
        return f"{url} answered {reply.status_code}: {detail} ({hint})."
