"""Calypso as an MCP server: tools that search and answer with checkable citations (``tools``).

Streamable HTTP at ``/mcp`` on the API server (``http``) and stdio for desktop clients (``stdio``,
``calypso mcp``) serve the same tools; ``shapes`` are their outputs, ``render`` their text.
"""
