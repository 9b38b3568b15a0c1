"""Plain-text utilities shared by every layer (ingestion, generation, citations).

Modules here import nothing else from calypso, so any layer may use them.
"""
