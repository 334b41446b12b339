"""The corpus read by Ray Data's readers on the cluster: each worker gets the rows ``read_rows`` gives it in
this process, from local files, S3 and a Hugging Face dataset; skipped rows reach the run's ledger actor;
a training run over a corpus with bad rows finishes and reports them."""

from __future__ import annotations

import json

import pytest
import ray
from mlflow.tracking import MlflowClient

from conftest import QUICKSTART, SMALL
from distalign.config import load_config
from distalign.data.corpus_stream import CorpusStream, corpus_dataset, list_corpus_files, read_rows, start_ledger
from distalign.data.sources import CorpusSource
from distalign.storage import storage_filesystem
from corpus_files import write_corpus

pytestmark = pytest.mark.slow


def cluster_rows(stream, rank, workers, epoch=0):
    return sorted((r["lang"], r["text"], r["row"]) for r in corpus_dataset(stream, epoch, rank, workers, 0, 0.25)
                  .take_all())


def local_rows(stream, rank, workers, epoch=0):
    return sorted((lang, text, key) for rows in read_rows(stream, epoch, rank, workers)
                  for lang, text, key in zip(rows["lang"], rows["text"], rows["row"]))


def test_ray_readers_give_each_worker_its_rows_and_report_skips(ray_local, tmp_path):
    import datasets

    root = write_corpus(tmp_path)
    datasets.Dataset.from_dict({"sentence": ["uno dos", "", "tres"]}).save_to_disk(str(tmp_path / "hf"))
    sources = [CorpusSource(str(root / "txt"), "en"), CorpusSource(str(root / "jsonl"), "de"),
               CorpusSource(str(root / "pq"), "fr"), CorpusSource(lang="es", hf_dataset=str(tmp_path / "hf"),
                                                                 text_field="sentence")]
    ledger = start_ledger("test-ledger")
    stream = CorpusStream([list_corpus_files(s, f"data.corpora[{i}]") for i, s in enumerate(sources)],
                          ledger="test-ledger")
    for rank in (0, 1):
        assert cluster_rows(stream, rank, 2) == local_rows(stream, rank, 2)
    assert len(cluster_rows(stream, 0, 2)) + len(cluster_rows(stream, 1, 2)) == 9
    reports = {r.path: r.malformed for r in ray.get(ledger.reports.remote())}
    assert reports == {str(root / "jsonl" / "c.jsonl"): 2, str(root / "pq" / "d.parquet"): 2, str(tmp_path / "hf"): 1}
    ray.kill(ledger)


def test_ray_readers_stream_from_s3(ray_local, s3_endpoint):
    url, s3 = s3_endpoint
    for i in range(3):
        s3.put_object(Bucket="ckpt", Key=f"stream/part-{i}.jsonl",
                      Body="".join(json.dumps({"text": f"line {i} {j}"}) + "\n" for j in range(5)).encode())
    fs = storage_filesystem(url)
    stream = CorpusStream([list_corpus_files(CorpusSource("s3://ckpt/stream", "en"), "data.corpora[0]", fs)], fs)
    assert cluster_rows(stream, 0, 1, epoch=1) == local_rows(stream, 0, 1, epoch=1)
    assert len(cluster_rows(stream, 0, 1)) == 15


def test_training_over_a_corpus_with_bad_rows_reports_them(ray_local, distalign_home, tmp_path):
    lines = [json.dumps({"text": f"xa{i % 7} xa{i % 5} xa{i % 3}"}) for i in range(200)]
    lines[17] = '{"text": "cut sh'
    (tmp_path / "xa.jsonl").write_text("\n".join(lines) + "\n")
    config = load_config(QUICKSTART, SMALL + [
        "run.name=bad-corpus", "objectives.lexical.weight=0", "data.source=files",
        f"data.corpora=[{{path: {tmp_path / 'xa.jsonl'}, lang: xa}}]", "eval.every=0"])
    from distalign.train.trainer import run_training

    outcome = run_training(config)
    metrics = MlflowClient(config.tracking.uri).get_run(outcome.run_id).data.metrics
    assert metrics["data/skipped_corpus_rows"] == 1
    assert outcome.metrics["step"] == config.train.max_steps
