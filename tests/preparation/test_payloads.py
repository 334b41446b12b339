"""What crosses a process boundary is a dataclass, never a plain dict: the job each Ray Data task of a
table stream gets (``fn_kwargs``) and each corpus item task, the plan each Ray Train worker gets
(``train_loop_config``). Intercepted at
the real call sites; each payload must also survive the pickling that carries it. (Tune trials:
``tests/test_trials.py``.)"""

import dataclasses

import numpy as np
import ray.cloudpickle
from conftest import QUICKSTART, SMALL

from distalign.config import load_config
from distalign.data.corpus_stream import CorpusStream
from distalign.data.streams import STREAMS
from distalign.preparation import streams
from distalign.preparation.inputs import prepare_data
from distalign.preparation.streams import RayWorkerData, StreamBatchJob, build_datasets, corpus_feed
from distalign.train import trainer
from distalign.train.plan import TrainingPlan


def assert_typed(payload, cls):
    assert dataclasses.is_dataclass(payload) and not isinstance(payload, dict), type(payload)
    assert isinstance(payload, cls)
    again = ray.cloudpickle.loads(ray.cloudpickle.dumps(payload))
    assert type(again) is cls


class CapturedDataset:
    """Stands in for a Ray Dataset: keeps what ``map_batches`` would send to its tasks."""

    def __init__(self, sent):
        self.sent = sent

    def map_batches(self, fn, **kwargs):
        self.sent.append(kwargs["fn_kwargs"])
        return self

    def iter_torch_batches(self, **kwargs):
        yield {}


class CapturedItemTask:
    """Stands in for the corpus's item task (and the blocks it yields): keeps what each call would send."""

    def __init__(self, sent):
        self.sent = sent

    def options(self, **kwargs):
        return self

    def remote(self, item, index, shared):
        corpus, job = shared
        self.sent.append({"job": job, "corpus": corpus})
        return [{"item": np.full(8, index, dtype=np.int64), "row": np.zeros(8, dtype=np.int64)}]


def test_ray_data_tasks_and_train_workers_receive_dataclasses(distalign_home, monkeypatch):
    config = load_config(QUICKSTART, SMALL + ["run.name=payloads"])
    prepared = prepare_data(config)
    sent, plans = [], []
    monkeypatch.setattr("ray.data.from_arrow", lambda rows: CapturedDataset(sent))
    monkeypatch.setattr(streams, "_item_task", CapturedItemTask(sent))
    monkeypatch.setattr(streams.ray, "put", lambda value: ray.cloudpickle.loads(ray.cloudpickle.dumps(value)))
    monkeypatch.setattr(streams.ray, "get", lambda ref: ref)
    monkeypatch.setattr(streams.ray, "cancel", lambda ref: None)  # the items left when the generator is dropped
    build_datasets(prepared, config, config.train.max_steps)
    next(STREAMS["corpus"].worker_batches(RayWorkerData(0, 2, corpus_feed(prepared, config)), 8))
    assert len(sent) > config.train.num_workers  # a constraints dataset per worker, then the corpus's item tasks
    for payload in sent[config.train.num_workers:]:
        assert_typed(payload.pop("corpus"), CorpusStream)  # the corpus tasks also get the corpus
    for fn_kwargs in sent:
        assert set(fn_kwargs) == {"job"}  # one typed argument, not the job's fields as loose keys
        assert_typed(fn_kwargs["job"], StreamBatchJob)
        assert dataclasses.is_dataclass(fn_kwargs["job"].settings)
    assert {kwargs["job"].stream.name for kwargs in sent} == {"constraints", "corpus"}

    monkeypatch.setattr(trainer, "TorchTrainer", lambda fn, train_loop_config, **kwargs: plans.append(train_loop_config))
    trainer.build_trainer(config, {}, trainer.plan_training(config, prepared, ""), {}, None)
    (plan,) = plans
    assert_typed(plan, TrainingPlan)
    assert_typed(plan.schedule, type(plan.schedule))
    assert_typed(plan.corpus.job, StreamBatchJob)
