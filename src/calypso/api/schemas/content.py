"""Message content as clients send it: a string, or a list of typed parts whose text is a string."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, StrictStr

from calypso.errors import InvalidRequest

MAX_OUTPUT_TOKENS = 1_048_576  # far above any model's output limit; beyond it is a mistake, not a request


class ContentPart(BaseModel):
    """One part of a message's content; parts other than text (images, files) pass through unread."""

    model_config = ConfigDict(extra="allow")
    type: StrictStr
    text: StrictStr | None = None

    def wire(self) -> dict[str, Any]:
        """The part as the client sent it (for forwarding to the model)."""
        return self.model_dump(exclude_unset=True)


def check_parts(parts: list[Any], param: str) -> None:
    """For content not validated by a model (Responses ``input`` items): every part an object with string text."""
    for i, part in enumerate(parts):
        where = f"{param}[{i}]"
        if not isinstance(part, dict):
            raise InvalidRequest(f"Invalid type for '{where}': expected an object.", param=where, code="invalid_type")
        if not isinstance(part.get("type"), str):
            raise InvalidRequest(
                f"Invalid type for '{where}.type': expected a string.", param=f"{where}.type", code="invalid_type"
            )
        if "text" in part and not isinstance(part["text"], str):
            raise InvalidRequest(
                f"Invalid type for '{where}.text': expected a string.", param=f"{where}.text", code="invalid_type"
            )
