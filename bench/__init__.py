"""Benchmark definitions, one module per op: ``bench/<op>.py`` defines ``workloads()`` and
``implementations()`` (the interface is documented in harness/workflows/benchmark.py)."""

__all__: list[str] = []
