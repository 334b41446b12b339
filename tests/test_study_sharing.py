"""A study at 200 trials: inputs prepared once per distinct input and shared (the same prepared data a trial would
make itself), and trials at once from the cluster's or its autoscaler's size, read again as the study runs."""

from __future__ import annotations

import math
import pickle

from conftest import QUICKSTART, SMALL
from ray.core.generated import autoscaler_pb2

from distalign.config import load_config
from distalign.preparation.cache import content_key
from distalign.preparation.inputs import prepare_data
from distalign.studies.concurrency import (
    REREAD_S,
    ClusterLimit,
    ClusterSizedLimiter,
    ClusterSizedVariants,
    autoscaler_max_resources,
)
from distalign.studies.shared_inputs import check_trials, inputs_key, staged_for_trials
from distalign.studies.study import load_study
from distalign.train.preflight import check_run
from distalign.train.trial_resources import trials_that_fit

STUDY = QUICKSTART.parents[2] / "tuning" / "quickstart.yaml"  # lr x data.max_constraints: 4 trials, 2 inputs


def test_the_inputs_key_ignores_what_changes_no_input():
    base = load_config(QUICKSTART, SMALL)
    for same in (
        ["train.lr=1e-4", "run.name=another"],
        ["objectives.lexical.temperature=0.1"],
        ["objectives.lexical.weight=0.5"],
    ):
        assert inputs_key(base) == inputs_key(load_config(QUICKSTART, [*SMALL, *same])), same
    for changed in (
        "train.seed=1",
        "data.max_constraints=100",
        "train.num_workers=4",
        "model.tiny.vocab_size=777",
        "objectives.mlm.weight=0",
        "objectives.static.extract_layer=2",
    ):
        assert inputs_key(base) != inputs_key(load_config(QUICKSTART, [*SMALL, changed])), changed


def test_trials_of_one_input_share_what_each_would_prepare_itself(tmp_path, caplog):
    """The first trial of each input is prepared; the other trial of that input gets
    that result, equal field by field to what it prepares itself."""
    _, trials = load_study(
        STUDY, [*SMALL, f"storage.path={tmp_path / 'runs'}", f"tracking.uri=sqlite:///{tmp_path / 'm.db'}"]
    )
    with caplog.at_level("INFO", logger="distalign"):
        prepared = check_trials(trials)
    assert "inputs of the 4 trials checked and prepared (2 distinct)" in caplog.text
    assert len(prepared) == 2
    later = trials["quickstart-tune-002"]  # lr 3e-4: shares quickstart-tune-000's inputs (lr 1e-3)
    shared = pickle.loads(pickle.dumps(prepared[inputs_key(later)]))  # as the object store hands it over
    own = prepare_data(later)
    assert shared == own  # every field: tables (pyarrow's equals), the corpus stream, pairs, the model's path
    # the trial's own checks take the shared inputs as they are: nothing is read again
    assert check_run(later, resources=False, prepared=shared).prepared is shared


def test_on_s3_an_input_is_staged_once_for_the_study(s3_endpoint, distalign_home):
    """Storage on S3: the driver's tiny model and generated corpora go up once per distinct input, under the
    study's prefix, and the trials' shared inputs name the staged copies."""
    url, s3 = s3_endpoint
    _, trials = load_study(
        STUDY,
        [
            *SMALL,
            "storage.path=s3://ckpt/studies",
            f"storage.endpoint_url={url}",
            f"tracking.uri=sqlite:///{distalign_home / 'm.db'}",
            "grid.train.lr=[1e-3]",
            "grid.data.max_constraints=[400]",
        ],
    )
    ((key, inputs),) = check_trials(trials).items()
    staged = staged_for_trials("quickstart-tune", key, inputs, trials["quickstart-tune-000"])
    prefix = f"studies/quickstart-tune-inputs/{content_key(key)}/inputs"
    assert staged.model_path == f"s3://ckpt/{prefix}/model"
    assert all(path.startswith(f"ckpt/{prefix}/corpus/") for source in staged.corpus.sources for path in source.paths)
    listed = {o["Key"] for o in s3.list_objects_v2(Bucket="ckpt", Prefix="studies/")["Contents"]}
    assert f"{prefix}/model/_STAGED" in listed and not any("quickstart-tune-000" in name for name in listed)
    assert staged.constraints == inputs.constraints


def test_the_autoscalers_maximum_from_its_node_groups():
    config = autoscaler_pb2.ClusterConfig(
        node_group_configs=[
            autoscaler_pb2.NodeGroupConfig(name="head", resources={"CPU": 4}, max_count=1),
            autoscaler_pb2.NodeGroupConfig(name="gpu", resources={"CPU": 16, "GPU": 8}, max_count=16),
            autoscaler_pb2.NodeGroupConfig(name="none", resources={"CPU": 64}, max_count=0),
        ],
        max_resources={"GPU": 100},
    )
    assert autoscaler_max_resources(config) == {"CPU": 4 + 16 * 16, "GPU": 100}
    unbounded = autoscaler_pb2.ClusterConfig(
        node_group_configs=[autoscaler_pb2.NodeGroupConfig(name="cpu", resources={"CPU": 8}, max_count=-1)]
    )
    assert autoscaler_max_resources(unbounded) == {"CPU": math.inf}
    assert autoscaler_max_resources(None) == {}  # no autoscaler (a local cluster, nodes joined by hand)


def test_trials_that_fit_the_largest_size():
    trial = {"CPU": 8.1, "GPU": 8.0}  # one 8-worker GPU trial
    assert trials_that_fit(trial, {"CPU": 260.0, "GPU": 100.0}, 200) == 12  # by GPUs
    assert trials_that_fit(trial, {"CPU": 0.0}, 200) == 1  # autoscale-from-0 without a config: one, to start nodes
    assert trials_that_fit(trial, {"CPU": math.inf, "GPU": math.inf}, 200) == 200  # an unbounded autoscaler
    assert trials_that_fit({"CPU": 0.6, "GPU": 0.0}, {"CPU": 2.0}, 200) == 3  # a resource not asked for is no bound


def noop(config):
    """A trainable that the grid's trials name (none runs here)."""


class Cluster:
    """A cluster that nodes join: its size, and the time, set by the test."""

    def __init__(self):
        self.resources, self.now = {"CPU": 1.0}, 0.0

    def capacity(self):
        return dict(self.resources)

    def clock(self):
        return self.now


def test_a_grid_starts_more_trials_as_nodes_join(caplog):
    """A 5-trial grid of 1-CPU trials on a 1-CPU cluster: one starts; 3 CPUs join, and once the limit is read again
    two more start; the limit survives Tune's pickling of its search algorithm."""
    from ray import tune

    cluster = Cluster()
    variants = ClusterSizedVariants(ClusterLimit({"CPU": 1.0}, 5, cluster.capacity, cluster.clock))
    variants.add_configurations({"grid": {"run": noop, "config": {"x": tune.grid_search(list(range(5)))}}})
    started = [variants.next_trial()]
    assert started[0] is not None and variants.next_trial() is None
    cluster.resources = {"CPU": 3.0}
    assert variants.next_trial() is None  # not read again yet
    cluster.now += REREAD_S
    with caplog.at_level("INFO", logger="distalign"):
        started += [variants.next_trial(), variants.next_trial()]
    assert all(started) and variants.next_trial() is None
    assert "trials at once: 3" in caplog.text
    restored = pickle.loads(pickle.dumps(ClusterLimit({"CPU": 1.0}, 5)))
    assert (restored.need, restored.trials, restored.limit) == ({"CPU": 1.0}, 5, 0)  # read afresh once restored


def test_a_search_suggests_more_trials_as_nodes_join():
    """The search's limiter: one suggestion on a 1-CPU cluster, three once 3 CPUs are there and read again."""
    from ray.tune.search import Searcher

    class Counting(Searcher):  # a searcher suggesting x = 0, 1, 2, ...
        def __init__(self):
            super().__init__(metric="m", mode="max")
            self.made = 0

        def suggest(self, trial_id):
            self.made += 1
            return {"x": self.made}

        def on_trial_complete(self, trial_id, result=None, error=False):
            pass

    cluster = Cluster()
    limiter = ClusterSizedLimiter(Counting(), ClusterLimit({"CPU": 1.0}, 8, cluster.capacity, cluster.clock))
    assert limiter.suggest("t0") == {"x": 1} and limiter.suggest("t1") is None
    cluster.resources, cluster.now = {"CPU": 3.0}, REREAD_S
    assert [limiter.suggest(f"t{i}") for i in (2, 3, 4)] == [{"x": 2}, {"x": 3}, None]
    limiter.on_trial_complete("t0", {"m": 1.0})
    assert limiter.suggest("t5") == {"x": 4}
