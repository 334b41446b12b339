"""The streaming benchmark's corpus writer and table (the benchmark itself is run by hand: README)."""

from __future__ import annotations

import os

from distalign.bench.streaming import SHARD_MB, StreamingResult, format_table, rss_mb, write_corpus


def test_corpus_is_written_in_shards_of_the_asked_size(tmp_path):
    files = write_corpus(tmp_path / "c", SHARD_MB * 2.5, ["xa1 xa2", "xa3"])
    sizes = sorted(p.stat().st_size for p in (tmp_path / "c").glob("*.txt"))
    assert files == 3 == len(sizes)
    assert abs(sum(sizes) - SHARD_MB * 2.5 * 2**20) <= 3  # a closing newline per shard
    lines = (tmp_path / "c" / "part-00000.txt").read_text().splitlines()[:4]
    assert lines == ["xa1 xa2", "xa3", "xa1 xa2", "xa3"]


def test_table_and_memory_probe():
    table = format_table([StreamingResult(20, 1, 30.0, 60.0, 700, 0), StreamingResult(2048, 64, 31.0, 70.0, 720, 0)])
    assert "| 2.0 GB | 64 | 31.0 s | 70.0 s | 720 MB | 0 |" in table and "| 20 MB |" in table
    assert rss_mb(os.getpid()) > 10
