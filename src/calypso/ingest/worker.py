"""Run a parse in a child process under a memory cap, so a hostile file costs a child, not the server.

PDFium inflates whole streams and allocates as it likes, and not every stream it decodes can be
checked beforehand (encrypted PDFs; filter chains such as ASCIIHex then Flate). Capping the server's
own memory is no answer: PDFium calls abort() when an allocation fails (measured), which would take
the whole server down. A child capped with RLIMIT_AS dies alone; the next parse starts a new one.

A plain subprocess speaking length-prefixed pickles over its stdin/stdout, not multiprocessing:
multiprocessing's spawn re-imports the parent's __main__ script in the child, which breaks any
script that calls Calypso without an ``if __name__ == "__main__"`` guard.
"""

from __future__ import annotations

import importlib
import os
import pickle
import resource
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import IO, Any, TypeVar

from calypso.errors import CalypsoError

T = TypeVar("T")
HEADER = struct.Struct("<Q")  # length prefix of each pickled message


def send_message(stream: IO[bytes], value: Any) -> None:
    payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(HEADER.pack(len(payload)) + payload)
    stream.flush()


def receive_message(stream: IO[bytes]) -> Any:
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        raise EOFError("the worker process ended")
    (size,) = HEADER.unpack(header)
    payload = stream.read(size)
    if len(payload) < size:
        raise EOFError("the worker process ended mid-answer")
    return pickle.loads(payload)


def _call(module: str, name: str, args: tuple[Any, ...]) -> tuple[Any, Any]:
    """In the child: (result, None), or (None, error details that survive pickling)."""
    try:
        return getattr(importlib.import_module(module), name)(*args), None
    except MemoryError:
        return None, "memory"
    except CalypsoError as exc:
        # Exceptions pickle as type(*args), which would drop param, code and the cause.
        cause = exc.__cause__
        try:
            pickle.dumps(cause)
        except Exception:
            cause = RuntimeError(str(cause))
        return None, (type(exc), exc.message, exc.param, exc.code, cause)


def _serve(memory_bytes: int) -> None:
    """The child's loop: one request in, one answer out, until stdin closes."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    requests = sys.stdin.buffer
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything else printed (by C libraries too) goes to stderr, not into the answers
    while True:
        try:
            module, name, args = receive_message(requests)
        except EOFError:
            return
        send_message(answers, _call(module, name, args))


class _Worker:
    def __init__(self, memory_bytes: int) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # import what we import
        self.process = subprocess.Popen(
            [sys.executable, "-m", "calypso.ingest.worker", str(memory_bytes)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Any, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        send_message(self.process.stdin, (fn.__module__, fn.__qualname__, args))
        answer: tuple[Any, Any] = receive_message(self.process.stdout)
        return answer

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


_lock = threading.Lock()  # one parse at a time, as PDFium needs anyway
_workers: dict[int, _Worker] = {}


def run_capped(fn: Callable[..., T], args: tuple[Any, ...], memory_bytes: int, crashed: Callable[[], Exception]) -> T:
    """``fn(*args)`` in a child process with ``memory_bytes`` of address space.

    ``fn`` must be a module-level function. The child is reused between calls; when it runs out of
    memory or dies (PDFium aborts), ``crashed()`` is raised and the next call starts a fresh child.
    """
    with _lock:
        worker = _workers.get(memory_bytes)
        if worker is None:
            worker = _workers[memory_bytes] = _Worker(memory_bytes)
        try:
            result, error = worker.call(fn, args)
        except (EOFError, BrokenPipeError, pickle.UnpicklingError):
            del _workers[memory_bytes]
            worker.stop()
            raise crashed() from None
        except BaseException:  # interrupted mid-exchange: the pipe is out of step, start afresh next time
            del _workers[memory_bytes]
            worker.stop()
            raise
    if error == "memory":
        raise crashed()
    if error is not None:
        cls, message, param, code, cause = error
        raise cls(message, param=param, code=code) from cause
    value: T = result
    return value


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
