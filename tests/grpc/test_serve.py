"""`calypso serve` as a real process: gRPC beside HTTP on --grpc-port, auth off on loopback as over HTTP."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from xai_sdk import Client

from calypso.config import settings_table
from testkit.live_server import free_port


def _serve(home: Path, port: int, grpc_port: int) -> subprocess.Popen[str]:
    env = {**os.environ, "CALYPSO_HOME": str(home), "CALYPSO_LOG_LEVEL": "warning"}
    env.pop("CALYPSO_DATABASE_URL", None)
    command = ["serve", "--host", "127.0.0.1", "--port", str(port), "--grpc-port", str(grpc_port)]
    process = subprocess.Popen(
        [sys.executable, "-m", "calypso.cli", *command],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            raise AssertionError(f"calypso serve did not start: {process.communicate()[0]}")
        time.sleep(0.05)


def _stop(process: subprocess.Popen[str]) -> str:
    process.terminate()
    return process.communicate(timeout=30)[0]


def test_serve_listens_for_grpc_and_a_taken_port_leaves_http_up(tmp_path: Path) -> None:
    grpc_port = free_port()
    first = _serve(tmp_path / "a", free_port(), grpc_port)
    try:
        # Loopback with CALYPSO_AUTH=auto: no keys, as over HTTP; the SDK still needs some key to send.
        with Client(
            api_key="unused",
            management_api_key="unused",
            api_host=f"127.0.0.1:{grpc_port}",
            management_api_host=f"127.0.0.1:{grpc_port}",
            use_insecure_channel=True,
            timeout=30,
        ) as client:
            made = client.collections.create("from-serve")
            assert made.collection_id in [c.collection_id for c in client.collections.list().collections]
        second_port = free_port()
        second = _serve(tmp_path / "b", second_port, grpc_port)  # same gRPC port: taken
        try:
            assert httpx.get(f"http://127.0.0.1:{second_port}/health").status_code == 200
        finally:
            second_output = _stop(second)
        # Said at start, not as a bind error later (and never two servers sharing the port).
        assert f"xAI gRPC API: OFF, port {grpc_port} is in use by another process" in second_output
    finally:
        first_output = _stop(first)
    assert f"xAI gRPC API (xai-sdk) on 127.0.0.1:{grpc_port}" in first_output


def test_grpc_port_is_a_setting() -> None:
    rows = {name: default for name, default, _ in settings_table()}
    assert rows["CALYPSO_GRPC_PORT"] == "50051"


@pytest.mark.parametrize("value", ["-1", "70000"])
def test_grpc_port_out_of_range_is_refused(tmp_path: Path, value: str) -> None:
    env = {**os.environ, "CALYPSO_HOME": str(tmp_path), "CALYPSO_GRPC_PORT": value}
    result = subprocess.run(
        [sys.executable, "-m", "calypso.cli", "serve"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0 and "CALYPSO_GRPC_PORT" in result.stdout + result.stderr
