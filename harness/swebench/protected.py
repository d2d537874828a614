"""What a SWE-bench run must not touch: the files the benchmark's own tests and packaging are in
(the evaluation runs its tests on them). The SWE-bench arms give these globs to the
``protected-paths`` policy."""

SWEBENCH_PROTECTED = (
    "test_*.py",
    "*_test.py",
    "conftest.py",
    "tests/*",
    "*/tests/*",
    "setup.py",
    "setup.cfg",
    "pyproject.toml",
    "tox.ini",
    "pytest.ini",
)
