"""Dialects: each client's wire format, rendered from the one canonical grounded answer.

``calypso.citations`` grounds an answer (markers, segments, quotes, support) once; every module here
renders that ``GroundedAnswer`` and its events for one surface and owns that surface's wire objects:
``chat`` (Chat Completions: ``[n]`` or ``[Source N]`` markers, ``url_citation``, "Sources:"),
``responses`` / ``responses_stream`` / ``responses_wire`` (the Responses API, streamed or whole),
``xai`` (xAI's gRPC replies and inline citations), ``text`` (the CLI), with ``content`` the one place
that puts markers into text and ``styles`` the marker styles a bot chooses.
"""
