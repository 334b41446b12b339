"""A 2-trial Ray Tune study: each trial a TorchTrainer run, one MLflow parent run with nested children."""

from __future__ import annotations

import pytest
import yaml
from mlflow.tracking import MlflowClient

from conftest import QUICKSTART, SMALL
from distalign.tracking import PARENT_TAG
from distalign.tuning import run_study

pytestmark = pytest.mark.slow


def test_two_trial_study_logs_parent_and_child_runs(ray_local, distalign_home, tmp_path):
    study = tmp_path / "study.yaml"
    study.write_text(yaml.safe_dump({
        "study": "mini-study",
        "base": str(QUICKSTART),
        # one worker per trial and both trials at once: the suite's time goes to Ray start-up, not steps
        "overrides": SMALL + ["train.max_steps=4", "train.checkpoint_every=4", "eval.every=0", "train.num_workers=1"],
        "grid": {"train.lr": [1.0e-3, 2.0e-4]},
        "metric": "eval/bli/avg/mrr",
        "mode": "max",
        "max_concurrent_trials": 2,
    }))
    rows = run_study(study)
    assert [r["trial"] for r in rows] == ["mini-study-000", "mini-study-001"]
    assert all(r["eval/bli/avg/mrr"] is not None and not r["error"] for r in rows)

    client = MlflowClient(f"sqlite:///{distalign_home}/mlflow.db")
    experiment = client.get_experiment_by_name("distalign")
    runs = client.search_runs([experiment.experiment_id])
    (parent,) = [r for r in runs if r.info.run_name == "mini-study"]
    children = [r for r in runs if r.data.tags.get(PARENT_TAG) == parent.info.run_id]
    assert parent.info.status == "FINISHED"
    assert sorted(r.info.run_name for r in children) == ["mini-study-000", "mini-study-001"]
    assert sorted(r.data.params["train.lr"] for r in children) == ["0.0002", "0.001"]
    assert all(r.info.status == "FINISHED" and "eval/bli/avg/mrr" in r.data.metrics for r in children)
    best = max(r.data.metrics["eval/bli/avg/mrr"] for r in children)
    assert parent.data.metrics["best/eval/bli/avg/mrr"] == pytest.approx(best)
    assert {"trials.csv", "trials.png"} <= {a.path for a in client.list_artifacts(parent.info.run_id)}
