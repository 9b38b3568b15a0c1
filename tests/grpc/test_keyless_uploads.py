"""Keyless ``UploadFile`` with keys required: bytes without a key neither buy memory nor deny a keyed caller.

The server runs with a 1 MB upload limit, so the buffer for keyless uploads holds 1 MB per address and
4 MB in all (2 MB of it kept for addresses that made a keyed call). The attacker is a raw gRPC channel
without a key; the victim is the real xai-sdk client, whose own uploads are keyless on an insecure
channel (staging.py). Everything is on loopback, so both share one address.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import grpc
import pytest
from grpc_support import POLL, GrpcServer

from testkit.live_server import LiveServer, free_port

pytest.importorskip("xai_sdk", reason="the xAI gRPC surface needs the 'xai' extra (pip install -e '.[xai]')")

from xai_sdk.proto import files_pb2, files_pb2_grpc  # noqa: E402

from calypso.api.app import create_app  # noqa: E402
from calypso.config import Settings  # noqa: E402
from calypso.generation.fake_upstream import FakeUpstream  # noqa: E402
from calypso.grpc_api.server import staging_of  # noqa: E402
from calypso.grpc_api.staging import StagedUploads, StagingFull  # noqa: E402
from calypso.services import open_services  # noqa: E402

LIMIT = 1024 * 1024
PIECE = 64 * 1024


@pytest.fixture(scope="module")
def small_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GrpcServer]:
    http_port, grpc_port = free_port(), free_port()
    with FakeUpstream() as fake:
        settings = Settings(
            home=tmp_path_factory.mktemp("keyless-home"), auth="on", port=http_port, max_upload_bytes=LIMIT
        )
        services = open_services(settings)
        _, key = services.keys.create("team-a")
        _, other = services.keys.create("team-b")
        app = create_app(settings, services, grpc_port=grpc_port)
        try:
            with LiveServer(app, http_port):
                server = GrpcServer(
                    f"http://127.0.0.1:{http_port}", f"127.0.0.1:{grpc_port}", key, other, services, fake
                )
                server.app = app  # type: ignore[attr-defined] - its gRPC server's buffer, for the tests
                yield server
        finally:
            services.close()


def chunks(name: str, size: int, hold: threading.Event | None = None) -> Iterator[files_pb2.UploadFileChunk]:
    """An upload of ``size`` bytes; with ``hold``, the stream stops after half and waits for it."""
    yield files_pb2.UploadFileChunk(init=files_pb2.UploadFileInit(name=name))
    for sent in range(0, size, PIECE):
        if hold is not None and sent >= size // 2:
            hold.wait(30)
            hold = None
        yield files_pb2.UploadFileChunk(data=b"a" * min(PIECE, size - sent))


def test_a_flood_without_a_key_does_not_deny_the_sdk_client(small_server: GrpcServer) -> None:
    """The issue's attack, scaled down: four near-limit keyless uploads, then a real user's upload_document."""
    with grpc.insecure_channel(small_server.grpc_address) as channel:
        files = files_pb2_grpc.FilesStub(channel)
        flood = [files.UploadFile(chunks(f"flood{i}.txt", LIMIT)).id for i in range(4)]
    with small_server.client() as client:
        made = client.collections.create("after-the-flood")
        document = client.collections.upload_document(
            made.collection_id,
            "note.md",
            b"# Note\n\nRefunds take thirty days.\n",
            wait_for_indexing=True,
            poll_interval=POLL,
        )
        assert document.file_metadata.file_id
        # What the flood left staged was evicted, oldest first, to make room: its ids now name nothing.
        with pytest.raises(grpc.RpcError) as gone:
            client.collections.add_existing_document(made.collection_id, flood[0])
        assert gone.value.code() == grpc.StatusCode.NOT_FOUND


def test_keyless_bytes_are_counted_as_they_arrive(small_server: GrpcServer) -> None:
    """Two concurrent keyless streams from one address: the second is refused mid-stream, not buffered whole."""
    hold = threading.Event()
    staging = staging_of(small_server.app.state.grpc_server)  # type: ignore[attr-defined]
    assert staging.held() == 0  # the flood test's leftovers were evicted or claimed
    with grpc.insecure_channel(small_server.grpc_address) as channel:
        files = files_pb2_grpc.FilesStub(channel)
        first = files.UploadFile.future(chunks("first.txt", LIMIT - PIECE, hold))  # half sent, then waits
        try:
            for _ in range(3000):  # until the server has counted the first half (a hang guard, no timing)
                if staging.held() >= (LIMIT - PIECE) // 2 - PIECE:
                    break
                time.sleep(0.01)
            with pytest.raises(grpc.RpcError) as refused:
                files.UploadFile(chunks("second.txt", LIMIT - PIECE))
        finally:
            hold.set()
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "without a key" in (refused.value.details() or "")
        assert first.result(timeout=30).id.startswith("file-")  # the first finishes once released


def test_reserved_room_is_only_for_addresses_that_made_a_keyed_call() -> None:
    """The policy itself, with peers on several addresses (which loopback cannot give the server)."""
    staging = StagedUploads(400, per_peer_bytes=200, reserved_bytes=200)
    keyed, anonymous = "ipv4:10.0.0.1:5000", ["ipv4:10.0.0.2:5000", "ipv4:10.0.0.3:5000", "ipv4:10.0.0.4:5000"]
    staging.vouch("ipv4:10.0.0.1:6000")  # any call with a key from that address
    receiving = []
    for peer in anonymous[:2]:  # anonymous addresses fill their whole share while still sending
        intake = staging.receiving(peer)
        intake.add(100)
        receiving.append(intake)
    with pytest.raises(StagingFull):
        staging.receiving(anonymous[2]).add(1)  # the anonymous share (400 - 200) is taken
    intake = staging.receiving(keyed)
    intake.add(200)  # the reserved room is still there for the keyed address
    staged = intake.finish("mine.txt", b"k" * 200)
    assert staging.take(staged.id) == staged
    for intake in receiving:
        intake.close()
    assert staging.held() == 0


def test_per_address_room_frees_by_evicting_that_address_s_oldest_upload() -> None:
    staging = StagedUploads(1000, per_peer_bytes=300)
    first = staging.receiving("ipv4:10.0.0.9:1")
    first.add(250)
    kept = first.finish("a.txt", b"a" * 250)
    second = staging.receiving("ipv4:10.0.0.9:2")
    second.add(250)  # same address: its own older staged upload makes room
    assert staging.take(kept.id) is None
    second.close()
