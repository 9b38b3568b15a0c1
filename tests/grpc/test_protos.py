"""xAI's messages load without the xai_sdk client package, and the package still imports whole afterwards."""

from __future__ import annotations

import json
import subprocess
import sys

SERVER_FIRST = """
import json, sys
import calypso.grpc_api.server
from calypso.grpc_api import protos
loaded = {name: name in sys.modules for name in ("xai_sdk.aio", "aiohttp", "requests")}
import xai_sdk, xai_sdk.proto
from xai_sdk.chat import user
request = protos.chat_pb2.GetCompletionsRequest(model="m", messages=[user("hi")])
print(json.dumps({"before": loaded, "client": xai_sdk.Client.__name__, "same": xai_sdk.proto.chat_pb2.GetCompletionsRequest is protos.chat_pb2.GetCompletionsRequest,
                  "parsed": protos.chat_pb2.GetCompletionsRequest.FromString(request.SerializeToString()).model}))
"""

SDK_FIRST = """
import json
import xai_sdk.proto
from calypso.grpc_api import protos
print(json.dumps({"same": xai_sdk.proto.files_pb2 is protos.files_pb2}))  # the SDK's own modules
"""


def _fresh(script: str) -> dict:
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_the_server_loads_the_messages_without_the_sdk_clients() -> None:
    seen = _fresh(SERVER_FIRST)
    assert seen["before"] == {"xai_sdk.aio": False, "aiohttp": False, "requests": False}
    # The real package imports afterwards, with the very message classes the server uses.
    assert seen["client"] == "Client" and seen["same"] is True and seen["parsed"] == "m"


def test_a_process_that_imported_the_sdk_first_shares_its_modules() -> None:
    assert _fresh(SDK_FIRST) == {"same": True}
