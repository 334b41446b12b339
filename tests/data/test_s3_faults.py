"""Transient S3 errors (HTTP 500s and stalled requests from a proxy in front of moto's server) are retried: a
corpus read and a checkpoint's upload and download through the run's storage filesystem complete, with
every row and byte, not a skipped file or a failed run."""

from __future__ import annotations

import logging
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from ray.train._internal.storage import _download_from_fs_path, _upload_to_fs_path

from distalign import storage
from distalign.data import corpus_stream
from distalign.data.corpus_stream import CorpusStream, SkipLedger, list_corpus_files, read_rows
from distalign.data.sources import CorpusSource
from distalign.tools.bench.s3_proxy import Faults, S3Proxy

# Four failures in a row every fifteen requests: a request that meets the burst fails four times (pyarrow's
# default three tries gave up: a skipped corpus file, a failed checkpoint upload).
BURST = Faults(period=15, burst=4)


def put_corpus(s3) -> None:
    s3.put_object(Bucket="ckpt", Key="faults/txt/a.txt", Body="".join(f"sentence {i}\n" for i in range(1500)).encode())
    s3.put_object(Bucket="ckpt", Key="faults/txt/b.txt", Body="".join(f"phrase {i}\n" for i in range(500)).encode())
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"text": [f"row {i}" for i in range(400)]}), sink, row_group_size=100)
    s3.put_object(Bucket="ckpt", Key="faults/pq/c.parquet", Body=sink.getvalue().to_pybytes())


def corpus_rows(url: str, ledger: SkipLedger, read_url: str = "") -> list[tuple[str, int]]:
    """Every row of the corpus and its identity, listed (as the driver does) at ``url``, read at ``read_url``."""
    fs = storage.s3_filesystem(url)
    sources = [
        list_corpus_files(CorpusSource(f"s3://ckpt/faults/{kind}", "xa"), f"data.corpora[{i}]", fs)
        for i, kind in enumerate(("txt", "pq"))
    ]
    stream = CorpusStream(sources, storage.s3_filesystem(read_url or url), unit_bytes=8192)
    return sorted(
        (text, row)
        for rows in read_rows(stream, ledger=ledger)
        for text, row in zip(rows["text"], rows["row"].tolist())
    )


@pytest.fixture(scope="module")
def clean(s3_endpoint) -> list[tuple[str, int]]:
    """The corpus on moto, and its rows read without faults."""
    url, s3 = s3_endpoint
    put_corpus(s3)
    rows = corpus_rows(url, SkipLedger())
    assert len(rows) == 2400
    return rows


def test_a_corpus_read_and_a_checkpoint_round_trip_ride_out_bursts_of_s3_errors(s3_endpoint, clean, tmp_path):
    url, _ = s3_endpoint
    checkpoint = tmp_path / "checkpoint"
    (checkpoint / "model").mkdir(parents=True)
    for name, size in (("model/weights.bin", 300_000), ("optimizer.pt", 200_000), ("streams.0.json", 100)):
        (checkpoint / name).write_bytes(os.urandom(size))
    with S3Proxy(url, BURST) as proxy:
        ledger = SkipLedger()
        assert corpus_rows(proxy.url, ledger) == clean
        assert not ledger.files and not ledger.rows
        fs = storage.s3_filesystem(proxy.url)
        _upload_to_fs_path(str(checkpoint), fs, "ckpt/faults/run/checkpoint_000001")  # as Ray Train persists one
        _download_from_fs_path(fs, "ckpt/faults/run/checkpoint_000001", str(tmp_path / "back"))
        assert proxy.tally.failed >= 8  # the bursts did meet the reads and writes
    for name in ("model/weights.bin", "optimizer.pt", "streams.0.json"):
        assert (tmp_path / "back" / name).read_bytes() == (checkpoint / name).read_bytes()


def test_a_read_failing_after_the_storage_tries_is_begun_again_counted_and_logged(
    s3_endpoint, clean, monkeypatch, caplog
):
    """No retries at the storage, every seventh request failed (HTTP 500 or stalled past the client's
    timeout): the corpus reader's own retries read every row, and each one is counted and logged."""
    url, _ = s3_endpoint
    monkeypatch.setattr(storage, "S3_RETRIES", 0)
    monkeypatch.setattr(corpus_stream, "RETRY_WAIT_S", 0.01)
    for faults in (Faults(period=7), Faults(period=100, stall_s=3.5)):
        with S3Proxy(url, faults) as proxy, caplog.at_level(logging.WARNING, logger="distalign"):
            ledger = SkipLedger()
            assert corpus_rows(url, ledger, read_url=proxy.url) == clean
        retries = [r for r in caplog.records if "retry" in r.getMessage()]
        assert not ledger.files and ledger.retried() == len(retries) == proxy.tally.failed > 0, faults
        caplog.clear()


@pytest.mark.parametrize("n, fails", [(0, True), (3, True), (4, False), (8, False), (9, True)])
def test_faults_fail_bursts_of_requests(n, fails):
    assert Faults(period=9, burst=4).fails(n) is fails
    assert not Faults().fails(n)


def test_the_proxy_counts_the_bytes_of_ranged_and_whole_gets(s3_endpoint):
    url, s3 = s3_endpoint
    s3.put_object(Bucket="ckpt", Key="faults/count/x.bin", Body=bytes(range(256)) * 40)  # 10240 bytes
    with S3Proxy(url) as proxy:
        fs = storage.s3_filesystem(proxy.url)
        with fs.open_input_file("ckpt/faults/count/x.bin") as f:
            f.seek(1000)
            assert f.read(500) == (bytes(range(256)) * 40)[1000:1500]
        assert proxy.tally.get_bytes == {"ckpt/faults/count/x.bin": 500}
        with fs.open_input_stream("ckpt/faults/count/x.bin") as f:
            f.read()
        assert proxy.tally.bytes_under("ckpt/faults/count/") == 500 + 10240 and proxy.tally.failed == 0
