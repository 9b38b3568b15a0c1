"""Text embeddings: one contract (``base.Embedder``), backends side by side."""
