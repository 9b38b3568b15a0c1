"""The xai-sdk collections API against Calypso over gRPC: create, upload with wait_for_indexing, list, search."""

from __future__ import annotations

import asyncio

import grpc
import httpx
import pytest
from grpc_support import DEMO, POLL, Collection, GrpcServer
from xai_sdk.proto import collections_pb2


def test_upload_with_wait_for_indexing_then_list_and_get(grpc_server: GrpcServer, collection: Collection) -> None:
    with grpc_server.client() as client:
        listed = client.collections.list()
        mine = [c for c in listed.collections if c.collection_id == collection.id]
        assert len(mine) == 1
        assert mine[0].collection_name == "policies"
        assert mine[0].collection_description == "refunds and office rules"
        assert mine[0].documents_count == 2 and mine[0].total_file_size > 0

        documents = client.collections.list_documents(collection.id)
        names = [d.file_metadata.name for d in documents.documents]
        assert names == ["office_handbook.md", "refund_policy_2026.md"]  # by name, the SDK's default
        for document in documents.documents:
            assert document.status == collections_pb2.DOCUMENT_STATUS_PROCESSED
            assert document.chunk_count > 0 and document.chunks_processed_count == document.chunk_count
            assert dict(document.fields) == {"team": "support"}

        refund = client.collections.get_document(collection.refund_file_id, collection.id)
        assert refund.file_metadata.file_id == collection.refund_file_id
        assert refund.file_metadata.size_bytes == len((DEMO / "refund_policy_2026.md").read_bytes())


def test_search_finds_the_passage(grpc_server: GrpcServer, collection: Collection) -> None:
    with grpc_server.client() as client:
        found = client.collections.search("full refund within 30 days", [collection.id], limit=3)
    assert 1 <= len(found.matches) <= 3
    top = found.matches[0]
    assert top.file_id == collection.refund_file_id
    assert "30 days" in top.chunk_content
    assert 0 < top.score <= 1 and list(top.collection_ids) == [collection.id]
    assert [m.score for m in found.matches] == sorted((m.score for m in found.matches), reverse=True)


def test_a_collection_is_a_vector_store_on_http(grpc_server: GrpcServer, collection: Collection) -> None:
    headers = {"authorization": f"Bearer {grpc_server.key}"}
    store = httpx.get(f"{grpc_server.http_url}/v1/vector_stores/{collection.id}", headers=headers).json()
    assert store["name"] == "policies" and store["file_counts"]["completed"] == 2
    files = httpx.get(f"{grpc_server.http_url}/v1/vector_stores/{collection.id}/files", headers=headers).json()
    assert {f["id"] for f in files["data"]} == {collection.refund_file_id, collection.handbook_file_id}


def test_another_workspace_does_not_see_the_collection(grpc_server: GrpcServer, collection: Collection) -> None:
    with grpc_server.client(grpc_server.other_key) as client:
        assert collection.id not in [c.collection_id for c in client.collections.list().collections]
        with pytest.raises(grpc.RpcError) as caught:
            client.collections.get(collection.id)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


def test_async_client_full_cycle(grpc_server: GrpcServer) -> None:
    async def cycle() -> None:
        client = grpc_server.async_client()
        made = await client.collections.create("scratch")
        document = await client.collections.upload_document(
            made.collection_id,
            "handbook.md",
            (DEMO / "office_handbook.md").read_bytes(),
            wait_for_indexing=True,
            poll_interval=POLL,
        )
        assert document.status == collections_pb2.DOCUMENT_STATUS_PROCESSED
        found = await client.collections.search("visitor badge", [made.collection_id])
        assert found.matches and "badge" in found.matches[0].chunk_content
        file_id = document.file_metadata.file_id
        await client.collections.remove_document(made.collection_id, file_id)
        assert (await client.collections.list_documents(made.collection_id)).documents == []
        found = await client.collections.search("visitor badge", [made.collection_id])
        assert list(found.matches) == []  # removed: out of search at once
        await client.collections.delete(made.collection_id)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await client.collections.get(made.collection_id)
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        await client.close()

    asyncio.run(cycle())


def test_collection_names_and_fields_are_bounded_as_vector_stores(
    grpc_server: GrpcServer, collection: Collection
) -> None:
    """Issue 26: the HTTP API's bounds hold over gRPC too (a 1 MB name is refused, not stored)."""
    with grpc_server.client() as client:
        before = len(client.collections.list().collections)
        with pytest.raises(grpc.RpcError) as name:
            client.collections.create("n" * 257)
        assert name.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "256" in name.value.details()
        with pytest.raises(grpc.RpcError) as description:
            client.collections.create("ok", description="d" * 600)
        assert description.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert len(client.collections.list().collections) == before
        with pytest.raises(grpc.RpcError) as fields:
            client.collections.add_existing_document(
                collection.id, collection.refund_file_id, fields={f"k{i}": "v" for i in range(17)}
            )
        assert fields.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "16" in fields.value.details()
