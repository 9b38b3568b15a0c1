"""What the gRPC tests share besides fixtures (a module of its own: ``conftest`` is ambiguous across test folders)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("xai_sdk", reason="the xAI gRPC surface needs the 'xai' extra (pip install -e '.[xai]')")

from xai_sdk import AsyncClient, Client  # noqa: E402

from calypso.generation.fake_upstream import FakeUpstream  # noqa: E402
from calypso.services import Services  # noqa: E402

DEMO = Path(__file__).resolve().parents[2] / "src" / "calypso" / "demo"
POLL = datetime.timedelta(seconds=0.05)  # the SDK polls every 10 s by default


@dataclass
class GrpcServer:
    http_url: str
    grpc_address: str
    key: str  # a key of workspace "team-a"
    other_key: str  # a key of workspace "team-b"
    services: Services
    fake: FakeUpstream

    def client(self, key: str | None = None) -> Client:
        key = key or self.key
        return Client(
            api_key=key,
            management_api_key=key,
            api_host=self.grpc_address,
            management_api_host=self.grpc_address,
            use_insecure_channel=True,
            timeout=60,
        )

    def async_client(self, key: str | None = None) -> AsyncClient:
        key = key or self.key
        return AsyncClient(
            api_key=key,
            management_api_key=key,
            api_host=self.grpc_address,
            management_api_host=self.grpc_address,
            use_insecure_channel=True,
            timeout=60,
        )


@dataclass
class Collection:
    id: str
    refund_file_id: str
    handbook_file_id: str
