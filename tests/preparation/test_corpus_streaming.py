"""The corpus read in Ray Data tasks on the cluster: a worker's items give the sequences they give in this
process, from local files, S3 and a Hugging Face dataset; skipped rows reach the run's ledger actor. (A training
run over a corpus with bad rows finishes and reports them: the MLM + TLM run in tests/objectives/test_tlm.py.)"""

from __future__ import annotations

import dataclasses
import json

import pytest
import ray
from conftest import QUICKSTART, SMALL
from corpus_files import write_corpus

from distalign.config import load_config
from distalign.data.corpus_plan import Item
from distalign.data.corpus_stream import CorpusStream, list_corpus_files, start_ledger
from distalign.data.sources import CorpusSource
from distalign.preparation.inputs import prepare_data
from distalign.preparation.ray_streams import LocalWorkerData, RayWorkerData, corpus_feed
from distalign.preparation.table_rows import MappedTable
from distalign.storage import s3_filesystem

pytestmark = pytest.mark.slow


def sequences(data, items):
    return [
        (int(item), ids.tolist(), int(row))
        for block in data.corpus_items(items)
        for item, ids, row in zip(block["item"], block["input_ids"], block["row"])
    ]


def feed_over(config, corpus: CorpusStream):
    """The quickstart's corpus feed (its tokenizer and MLM preparer) reading ``corpus`` instead, its listing held
    as the workers get it (``CorpusStream.for_workers``)."""
    feed = corpus_feed(prepare_data(config), config)
    return dataclasses.replace(feed, corpus=corpus.for_workers(MappedTable.of(corpus.files())))


def same_on_cluster_and_here(feed, workers=2):
    """Every worker's items of epoch 1, read in Ray Data tasks and in this process: the same sequences."""
    for rank in range(workers):
        items = [Item(1, (unit,)) for unit in feed.corpus.units()[rank::workers]]
        cluster = sequences(RayWorkerData(rank, workers, feed), items)
        assert cluster == sequences(LocalWorkerData({}, feed, rank, workers), items)
    return cluster


def test_ray_tasks_read_units_as_this_process_does_and_report_skips(ray_local, distalign_home, tmp_path):
    import datasets

    root = write_corpus(tmp_path)
    datasets.Dataset.from_dict({"sentence": ["uno dos", "", "tres"]}).save_to_disk(str(tmp_path / "hf"))
    sources = [
        CorpusSource(str(root / "txt"), "xa"),
        CorpusSource(str(root / "jsonl"), "xb"),
        CorpusSource(str(root / "pq"), "xc"),
        CorpusSource(lang="xa", hf_dataset=str(tmp_path / "hf"), text_field="sentence"),
    ]
    ledger = start_ledger("test-ledger")
    corpus = CorpusStream(
        [list_corpus_files(s, f"data.corpora[{i}]") for i, s in enumerate(sources)], ledger="test-ledger"
    )
    config = load_config(QUICKSTART, SMALL + ["run.name=corpus-tasks", "objectives.lexical.weight=0"])
    feed = feed_over(config, corpus)
    assert len(feed.corpus.units()) == 5
    same_on_cluster_and_here(feed)
    reports = {r.path: r.malformed for r in ray.get(ledger.reports.remote())}
    assert reports == {str(root / "jsonl" / "c.jsonl"): 2, str(root / "pq" / "d.parquet"): 2, str(tmp_path / "hf"): 1}
    ray.kill(ledger)


def test_ray_tasks_read_byte_ranges_from_s3(ray_local, distalign_home, s3_endpoint):
    url, s3 = s3_endpoint
    for i in range(3):
        s3.put_object(
            Bucket="ckpt",
            Key=f"stream/part-{i}.jsonl",
            Body="".join(json.dumps({"text": f"xa{j % 7} xa{i}"}) + "\n" for j in range(50)).encode(),
        )
    fs = s3_filesystem(url)
    corpus = CorpusStream(
        [list_corpus_files(CorpusSource("s3://ckpt/stream", "xa"), "data.corpora[0]", fs)], fs, unit_bytes=300
    )
    config = load_config(QUICKSTART, SMALL + ["run.name=corpus-s3", "objectives.lexical.weight=0"])
    feed = feed_over(config, corpus)
    assert len(feed.corpus.units()) > 3  # each file cut into byte ranges
    same_on_cluster_and_here(feed)
