"""Connectors of synced sources: what a website, a folder, a git repository or a mailbox holds now.

A connector lists its source's items (``Found``), each with an external id and, when it is known without
fetching, a version; it fetches an item only when asked (``load``), conditionally where it can. It knows
nothing of documents or stores: ``services/source_sync.py`` compares what it finds with what the source
brought before, ingests what changed and deletes what is gone.
"""
