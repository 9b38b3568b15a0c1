"""Calypso's benchmarks: each module a script, run from the repository root as ``python -m bench.<name>``.
What two scripts share lives in ``bench/common/``; what the benchmarks share with the tests, in ``testkit/``."""
