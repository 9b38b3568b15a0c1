class BM25Index: pass
