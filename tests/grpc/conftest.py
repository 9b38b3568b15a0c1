"""A Calypso server with its gRPC listener on loopback, keys required, answering through the fake upstream.

Module-scoped: the collection the SDK creates and fills is shared by the chat tests of a module.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testkit.live_server import LiveServer, free_port

pytest.importorskip("xai_sdk", reason="the xAI gRPC surface needs the 'xai' extra (pip install -e '.[xai]')")


from grpc_support import DEMO, POLL, Collection, GrpcServer  # noqa: E402

from calypso.api.app import create_app  # noqa: E402
from calypso.config import Settings  # noqa: E402
from calypso.generation.fake_upstream import FakeUpstream  # noqa: E402
from calypso.services import open_services  # noqa: E402


@pytest.fixture(scope="module")
def grpc_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GrpcServer]:
    http_port, grpc_port = free_port(), free_port()
    with FakeUpstream() as fake:
        settings = Settings(
            home=tmp_path_factory.mktemp("grpc-home"),
            auth="on",
            port=http_port,  # as `calypso serve` knows it: source links point at the HTTP listener
            generator="upstream",
            llm_base_url=fake.base_url,
            llm_model="fake-model",
            chunk_size=400,
            chunk_overlap=60,
        )
        services = open_services(settings)
        _, key = services.keys.create("team-a")
        _, other = services.keys.create("team-b")
        try:
            with LiveServer(create_app(settings, services, grpc_port=grpc_port), http_port):
                yield GrpcServer(f"http://127.0.0.1:{http_port}", f"127.0.0.1:{grpc_port}", key, other, services, fake)
        finally:
            services.close()


@pytest.fixture(scope="module")
def collection(grpc_server: GrpcServer) -> Iterator[Collection]:
    """A collection the SDK created and filled (upload_document with wait_for_indexing), as a user would."""
    with grpc_server.client() as client:
        made = client.collections.create("policies", description="refunds and office rules")
        ids = []
        for name in ("refund_policy_2026.md", "office_handbook.md"):
            document = client.collections.upload_document(
                made.collection_id,
                name,
                (DEMO / name).read_bytes(),
                fields={"team": "support"},
                wait_for_indexing=True,
                poll_interval=POLL,
            )
            ids.append(document.file_metadata.file_id)
        yield Collection(made.collection_id, ids[0], ids[1])
