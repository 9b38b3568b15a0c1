"""Request bodies of the HTTP surfaces, as pydantic models."""
