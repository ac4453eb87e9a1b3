"""Benchmark-harness result files (pytest-benchmark, Google Benchmark, BMF, ...)."""
