"""In-memory keyword retrieval (BM25) over chunk texts."""

from calypso.retrieval.bm25 import BM25Index
from calypso.retrieval.tokenize import Analyzer, tokenize

__all__ = ["Analyzer", "BM25Index", "tokenize"]
