"""Benchmark data by name: the catalogue of evaluation resources, the data home they live in, and their download
(``distalign data fetch``). See docs/guides/data.md."""

from distalign.benchmark_data.home import data_home, eval_dir, fetch_command, not_fetched

__all__ = ["data_home", "eval_dir", "fetch_command", "not_fetched"]
