"""A real OpenAI-compatible ``/v1/embeddings`` server on loopback, backed by any ``Embedder``.

For tests and benchmarks of the HTTP backend (in the style of
``generation/fake_upstream.py``): the vectors are the wrapped model's own, so a
client talking to it must reproduce the in-process embeddings exactly::

    with EmbeddingsServer(LocalOnnxEmbedder(), api_key="k") as server:
        client = OpenAIEmbedder(server.base_url, "minilm", api_key="k")
        server.fail(503, times=2)   # the next two requests answer 503, then normally
        server.requests             # every request body, in order

It answers OpenAI's shapes: ``{"object": "list", "data": [{"object": "embedding",
"index", "embedding"}], "model", "usage"}`` and ``{"error": {...}}``.
"""

from __future__ import annotations

import threading
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from calypso.embeddings.base import Embedder
from calypso.loopback import LoopbackServer


def _error(status: int, message: str) -> JSONResponse:
    kind = {401: "authentication_error", 404: "invalid_request_error", 429: "requests"}.get(
        status, "server_error" if status >= 500 else "invalid_request_error"
    )
    return JSONResponse({"error": {"message": message, "type": kind, "param": None, "code": None}}, status_code=status)


class EmbeddingsServer:
    """Serves ``embedder`` at ``base_url`` (ending in ``/v1``) until stopped."""

    def __init__(
        self, embedder: Embedder, *, model: str | None = None, api_key: str | None = None, host: str = "127.0.0.1"
    ) -> None:
        self.embedder = embedder
        self.model = model or embedder.name
        self.api_key = api_key
        self.requests: list[Any] = []
        self.reverse = False  # answer data items in reverse order (clients must use "index")
        self._failures: list[tuple[int, int]] = []
        self._lock = threading.Lock()
        self.app = Starlette(routes=[Route("/v1/embeddings", self._embeddings, methods=["POST"])])
        self._loopback = LoopbackServer(self.app, "calypso-embeddings-server", host)

    @property
    def base_url(self) -> str:
        return f"http://{self._loopback.host}:{self._loopback.port}/v1"

    def fail(self, status: int, times: int = 1) -> None:
        """Answer the next ``times`` requests with ``status``."""
        with self._lock:
            self._failures.append((status, times))

    async def _embeddings(self, request: Request) -> JSONResponse:
        if self.api_key is not None and request.headers.get("authorization") != f"Bearer {self.api_key}":
            return _error(401, "Incorrect API key provided.")
        body = await request.json()
        with self._lock:
            self.requests.append(body)
            if self._failures:
                status, times = self._failures[0]
                self._failures[0] = (status, times - 1)
                if times <= 1:
                    self._failures.pop(0)
                return _error(status, f"scripted failure {status}")
        if body.get("model") != self.model:
            return _error(404, f"The model {body.get('model')!r} does not exist.")
        inputs = body.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        if not isinstance(inputs, list) or not all(isinstance(t, str) for t in inputs):
            return _error(400, "'input' must be a string or a list of strings.")
        vectors = await run_in_threadpool(self.embedder.embed, inputs)
        data = [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)]
        if self.reverse:
            data.reverse()
        tokens = sum(len(t.split()) for t in inputs)
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": self.model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    def start(self) -> EmbeddingsServer:
        self._loopback.start()
        return self

    def stop(self) -> None:
        self._loopback.stop()

    def __enter__(self) -> EmbeddingsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
