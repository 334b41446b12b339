"""The streaming benchmark's corpus writer, tables and I/O accounting (the benchmark itself is run by hand:
docs/benchmarks.md)."""

from __future__ import annotations

import os

import pytest

from distalign.data.corpus_stream import CorpusStream, list_corpus_files
from distalign.data.sources import CorpusSource
from distalign.tools.bench.streaming import (
    COUNTED,
    SHARD_MB,
    CountingFile,
    ReadResult,
    StreamingResult,
    counting_local_filesystem,
    format_io_table,
    format_table,
    merge_io_results,
    read_share,
    rss_mb,
    write_corpus,
)


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


def test_a_counting_file_counts_what_it_hands_out(tmp_path):
    (tmp_path / "f").write_bytes(b"x" * 1000)
    before = COUNTED[0]
    with CountingFile(tmp_path / "f") as f:
        f.seek(100)
        assert len(f.read(300)) == 300 and len(f.read()) == 600
    assert COUNTED[0] - before == 900


def test_workers_shares_read_every_row_once_and_each_byte_about_once(tmp_path):
    """3 workers over 1000 lines of 10 bytes cut into 4096-byte units: every line once, and the bytes the files
    handed out are the file's, plus the byte before each unit and its last line's tail."""
    (tmp_path / "c.txt").write_text("".join(f"line {i:04d}\n" for i in range(1000)))
    stream = CorpusStream(
        [list_corpus_files(CorpusSource(str(tmp_path / "c.txt"), "xa"), "c")],
        counting_local_filesystem(),
        unit_bytes=4096,
    )
    units = stream.units()
    assert len(units) == 3  # 10000 bytes in 4096-byte units
    shares = [read_share(stream, units, 3, rank, 0, 4) for rank in range(3)]
    assert sorted(s["rows"] for s in shares) == [333, 333, 334]
    assert 10000 < sum(s["counted"] for s in shares) <= 10000 + 2 + 2 * 128


def test_io_table_and_merging_invocations(tmp_path):
    one = ReadResult(
        storage="s3",
        corpus_mb=16,
        units=256,
        workers=2,
        corpus_bytes=1000,
        bytes_read=1010,
        rows=[90, 110],
        seconds=[1.0, 2.0],
        first_rows_s=[0.1, 0.3],
        nodes=2,
    )
    assert one.amplification == 1.01 and one.rows_spread == 1.1 and one.rows_per_s == [90, 55]
    assert "| s3 | 16 MB | 256 | 2 | 2 | 1.010 | 1.100 | 55–90 | 0.30 s |" in format_io_table([one])
    path = tmp_path / "r.json"
    merge_io_results(
        path,
        [
            one,
            ReadResult(
                storage="s3",
                corpus_mb=16,
                units=256,
                workers=1,
                corpus_bytes=1000,
                bytes_read=1001,
                rows=[200],
                seconds=[1.0],
                first_rows_s=[0.1],
                nodes=1,
            ),
        ],
    )
    merged = merge_io_results(
        path,
        [
            ReadResult(
                storage="s3",
                corpus_mb=16,
                units=256,
                workers=2,
                corpus_bytes=1000,
                bytes_read=1002,
                rows=[100, 100],
                seconds=[1.0, 1.0],
                first_rows_s=[0.1, 0.1],
                nodes=2,
            )
        ],
    )
    assert [(r.workers, r.bytes_read) for r in merged] == [(1, 1001), (2, 1002)]


def test_the_io_part_without_token_auth_stops_before_starting_anything(tmp_path, monkeypatch):
    from distalign.cli import main

    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    with pytest.raises(SystemExit, match="RAY_AUTH_MODE=token distalign bench streaming"):
        main(["bench", "streaming", "--parts", "io", "--output-dir", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()  # no corpus written, no node started


def test_the_feed_rate_counts_tokens_per_cpu_second_and_the_object_store_s_bytes(tmp_path):
    """``--parts tokenize`` on a little text: packed sequences are fewer and fuller, both kinds leave the item path
    unpadded (bytes per token far below the padded int64 blocks), and the table sets them against a GPU."""
    from distalign.tools.bench.feed_rate import FeedResult, format_feed_table, measure_feed

    texts = [
        f"sentence number {i} of the feed with words {' '.join([f'w{i * j % 97}' for j in range(i % 9)])}"
        for i in range(400)
    ]
    packed, alone = measure_feed(texts, tmp_path, 0.1, 256, 300)
    assert packed.packed and not alone.packed and packed.sequences < alone.sequences / 2
    for result in (packed, alone):
        assert result.tokens > 0 and result.cpu_s > 0 and result.stored_bytes < result.padded_bytes / 2
    table = format_feed_table(
        [
            FeedResult(
                packed=True,
                seq_length=512,
                text_bytes=2**20,
                sequences=10,
                tokens=200_000,
                cpu_s=1.0,
                wall_s=1.0,
                stored_bytes=4_000_000,
                padded_bytes=9_000_000,
            )
        ],
        100_000,
    )
    assert "| packed | 512 | 1.0 MB | 200,000 | 1,049 KB/s | 20.0 B (45 B) | 0.50 | 1.60 |" in table
