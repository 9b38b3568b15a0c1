"""What the tests and the benchmarks share: the PostgreSQL starter, the hostile-file generators, the bad-request
cases. Not shipped (the wheel holds only ``src/calypso``); importable from the repository root, which pytest
(``pythonpath``) and ``python -m bench.<name>`` both put on ``sys.path``."""
