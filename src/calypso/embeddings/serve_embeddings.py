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

import socket
import threading
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from calypso.embeddings.base import Embedder


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
        self._host, self._port = host, 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.app = Starlette(routes=[Route("/v1/embeddings", self._embeddings, methods=["POST"])])

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self._port}/v1"

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
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self._host, 0))
        self._port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app, log_config=None, log_level=None, access_log=False, lifespan="off", loop="asyncio", http="h11"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True, name="calypso-embeddings-server"
        )
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the embeddings server failed to start")
            threading.Event().wait(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> EmbeddingsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
