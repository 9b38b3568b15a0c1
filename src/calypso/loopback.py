"""An ASGI app served by uvicorn in a thread on a loopback socket: the scripted stand-ins tests talk to.

The socket is bound before serving (port 0 picks a free one), so there is no free-port race; the
logging of the host process is left alone.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn


class LoopbackServer:
    def __init__(self, app: Any, name: str, host: str = "127.0.0.1", port: int = 0, **config: Any) -> None:
        self.app, self.name, self.host, self.port = app, name, host, port
        self._config = config
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        # log_config/log_level None: a test helper must not reconfigure the host process's logging.
        config = uvicorn.Config(
            self.app,
            log_config=None,
            log_level=None,
            access_log=False,
            lifespan="off",
            loop="asyncio",
            http="h11",
            **self._config,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True, name=self.name
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
        self._server = self._thread = None
