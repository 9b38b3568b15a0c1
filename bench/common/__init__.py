"""Helpers the benchmark scripts share (data, corpora, timing, process figures, served Calypso); never scripts."""
