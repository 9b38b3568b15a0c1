"""Retrieval: the in-memory BM25 and vector indexes, query reduction, 0..1 scores, filters and fusion.

Text analysis (the analyzer, language detection, stopwords) is in ``calypso.text``.
"""
