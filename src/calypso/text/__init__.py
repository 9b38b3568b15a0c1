"""Plain text and its analysis, shared by every layer (ingestion, retrieval, generation, citations).

Sentences, CJK segmentation, control characters, language detection and the keyword analyzer
(``tokenize``: stemming, stopwords, stored terms). Modules here import nothing from calypso outside
``text/``, so any layer may use them.
"""
