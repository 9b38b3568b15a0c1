"""The stored-responses service: replies kept for GET and for ``previous_response_id``."""

from __future__ import annotations

from calypso.errors import InvalidRequest, NotFound
from calypso.models import StoredResponse
from calypso.scope import DEFAULT_WORKSPACE
from calypso.store.base import ResponseStore


class ResponseService:
    def __init__(self, store: ResponseStore) -> None:
        self.store = store

    def save(
        self, response: StoredResponse, previous_response_id: str | None, workspace: str = DEFAULT_WORKSPACE
    ) -> None:
        self.store.save(workspace, response, previous_response_id)

    def get(self, response_id: str, workspace: str = DEFAULT_WORKSPACE, param: str = "response_id") -> StoredResponse:
        stored = self.store.get(workspace, response_id)
        if stored is None:
            if param == "previous_response_id":  # OpenAI: a 400, not a 404, for the response to continue from
                raise InvalidRequest(
                    f"Previous response with id {response_id!r} not found (was it created with store=false?).",
                    param=param,
                    code="previous_response_not_found",
                )
            raise NotFound(f"No stored response {response_id!r}.", param=param)
        return stored

    def delete(self, response_id: str, workspace: str = DEFAULT_WORKSPACE) -> None:
        if not self.store.delete(workspace, response_id):
            raise NotFound(f"No stored response {response_id!r}.", param="response_id")
