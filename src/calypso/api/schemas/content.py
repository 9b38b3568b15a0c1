"""Message content as clients send it: a string, or a list of typed parts whose text is a string."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, StrictStr

MAX_OUTPUT_TOKENS = 1_048_576  # far above any model's output limit; beyond it is a mistake, not a request


class ContentPart(BaseModel):
    """One part of a message's content; parts other than text (images, files) pass through unread."""

    model_config = ConfigDict(extra="allow")
    type: StrictStr
    text: StrictStr | None = None

    def wire(self) -> dict[str, Any]:
        """The part as the client sent it (for forwarding to the model)."""
        return self.model_dump(exclude_unset=True)
