"""What crosses a process boundary is a dataclass, never a plain dict: the table stream each Ray task reading a
table stream's batch gets and each corpus item task, the plan each Ray Train worker gets
(``train_loop_config``). Intercepted at
the real call sites; each payload must also survive the pickling that carries it. (Tune trials:
``tests/test_trials.py``.)"""

import dataclasses

import numpy as np
import ray.cloudpickle
from conftest import QUICKSTART, SMALL

from distalign.config import load_config
from distalign.data.corpus_stream import CorpusStream
from distalign.data.ragged import RaggedRows
from distalign.data.stream_plugins import STREAMS
from distalign.preparation import ray_streams
from distalign.preparation.inputs import prepare_data
from distalign.preparation.ray_streams import (
    RayWorkerData,
    StreamBatchJob,
    TableStream,
    corpus_feed,
    store_tables,
    table_streams,
)
from distalign.preparation.table_rows import StoredTable
from distalign.train import trainer
from distalign.train.plan import TrainingPlan


def assert_typed(payload, cls):
    assert dataclasses.is_dataclass(payload) and not isinstance(payload, dict), type(payload)
    assert isinstance(payload, cls)
    again = ray.cloudpickle.loads(ray.cloudpickle.dumps(payload))
    assert type(again) is cls


class CapturedTableTask:
    """Stands in for the table streams' batch task: keeps what each call would send."""

    def __init__(self, sent):
        self.sent = sent

    def options(self, **kwargs):
        return self

    def remote(self, stream, positions):
        assert_typed(stream, TableStream)
        self.sent.append({"job": stream.job})
        return {"row": positions}


class CapturedItemTask:
    """Stands in for the corpus's item task (and the blocks it yields): keeps what each call would send."""

    def __init__(self, sent):
        self.sent, self.options_given = sent, {}

    def options(self, **kwargs):
        self.options_given = kwargs
        return self

    def remote(self, item, index, shared, cpus):
        corpus, job = shared
        self.sent.append({"job": job, "corpus": corpus})
        return [RaggedRows.of_columns({"item": np.full(8, index, dtype=np.int64), "row": np.zeros(8, dtype=np.int64)})]


def test_ray_tasks_and_train_workers_receive_dataclasses(distalign_home, monkeypatch):
    config = load_config(QUICKSTART, SMALL + ["run.name=payloads"])
    prepared = prepare_data(config)
    sent, plans = [], []
    monkeypatch.setattr(ray_streams, "_table_task", CapturedTableTask(sent))
    item_task = CapturedItemTask(sent)
    monkeypatch.setattr(ray_streams, "_item_task", item_task)
    monkeypatch.setattr(ray_streams.ray, "put", lambda value: ray.cloudpickle.loads(ray.cloudpickle.dumps(value)))
    monkeypatch.setattr(ray_streams.ray, "get", lambda ref: ref)
    monkeypatch.setattr(ray_streams.ray, "cancel", lambda ref: None)  # the items left when the generator is dropped
    tables = table_streams(prepared, config, store_tables(prepared, config))
    pairs = STREAMS["constraints"].worker_batches(RayWorkerData(0, 2, None, tables), 16)
    next(pairs)
    tasks = len(sent)  # the constraints' batches submitted ahead, then the corpus's item tasks
    corpus = STREAMS["corpus"].worker_batches(RayWorkerData(0, 2, corpus_feed(prepared, config)), 8)
    next(corpus)
    for stream in (pairs, corpus):  # their tasks left are cancelled now, by the stand-in (not by Ray, later)
        stream.batches.close()
    assert 0 < tasks < len(sent)
    # an item task pauses with so many blocks not yet taken: what a worker holds in the object store is bounded
    assert item_task.options_given["_generator_backpressure_num_objects"] == ray_streams.ITEM_BLOCKS_AHEAD
    for payload in sent[tasks:]:
        assert_typed(payload.pop("corpus"), CorpusStream)  # the corpus tasks also get the corpus
    for fn_kwargs in sent:
        assert set(fn_kwargs) == {"job"}  # one typed argument, not the job's fields as loose keys
        assert_typed(fn_kwargs["job"], StreamBatchJob)
        assert dataclasses.is_dataclass(fn_kwargs["job"].settings)
    assert {kwargs["job"].stream.name for kwargs in sent} == {"constraints", "corpus"}

    monkeypatch.setattr(
        trainer, "TorchTrainer", lambda fn, train_loop_config, **kwargs: plans.append(train_loop_config)
    )
    trainer.build_trainer(config, trainer.plan_training(config, prepared, ""), {}, None)
    (plan,) = plans
    assert_typed(plan, TrainingPlan)
    assert_typed(plan.schedule, type(plan.schedule))
    assert_typed(plan.corpus.job, StreamBatchJob)
    assert_typed(plan.tables["constraints"], TableStream)
    assert isinstance(plan.tables["constraints"].source, StoredTable)  # where the rows are, not the rows
