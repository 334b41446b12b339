"""A language-sample study (BabelBERT §5.1) at the smallest scale: two samples from two d_typ bins, each trial a
one-worker run in its trial's process; one MLflow parent run with nested, tagged children and the study's tables and
plots, all read back through the MLflow client; started again, the study resumes and runs nothing twice."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import yaml
from conftest import QUICKSTART, SMALL
from mlflow.tracking import MlflowClient

from distalign.checkpoint import MODEL_DIR, read_state
from distalign.config import load_config
from distalign.eval.distributed import load_encoder
from distalign.eval.selection import SELECTION_METRIC, evaluate_bli, in_loop_settings
from distalign.logs import quiet_console
from distalign.preparation.inputs import prepare_data
from distalign.studies import load_study, run_study
from distalign.studies.tune_run import STOPPED_EARLY_TAG
from distalign.tracking import BEST_CHECKPOINT_TAG, CHECKPOINT_TAG, PARENT_TAG, START_MODEL_TAG
from distalign.train.checkpoint_store import REPORTED_FILE
from distalign.train.final_scores import bli_test_sets
from distalign.train.trainer import run_training

pytestmark = pytest.mark.slow
PNG = b"\x89PNG\r\n\x1a\n"


def test_language_sample_study_logs_tagged_trials_and_plots_and_resumes(ray_local, distalign_home, tmp_path):
    study = tmp_path / "study.yaml"
    study.write_text(
        yaml.safe_dump(
            {
                "study": "mini-samples",
                "base": str(QUICKSTART),
                # one worker per trial and both trials at once: the suite's time goes to Ray start-up, not steps
                "overrides": SMALL
                + [
                    "data.synthetic.languages=[en,de,fr,hi,ja,fi,tr]",
                    "data.synthetic.num_concepts=120",
                    "objectives.mlm.weight=0",
                    "train.max_steps=4",
                    "train.checkpoint_every=2",
                    "eval.every=2",
                    "train.num_workers=1",
                    "train.constraint_batch_size=8",
                    "eval.languages=[en,de]",
                ],
                "language_samples": {
                    "size": 3,
                    "num_samples": 500,
                    "bins": 2,
                    "per_pair": 8,
                    "test_languages": ["fi", "tr"],
                },
                "metric": "test/bli/avg/mrr",
                "mode": "max",
                "max_concurrent_trials": 2,
            }
        )
    )
    rows = run_study(study)
    _, trials = load_study(study)
    assert [r["trial"] for r in rows] == ["mini-samples-000", "mini-samples-001"]
    assert all(r["test/bli/avg/mrr"] is not None and not r["error"] for r in rows)
    assert rows[0]["d_typ"] < rows[1]["d_typ"] and [r["bin"] for r in rows] == [0, 1]

    client = MlflowClient(f"sqlite:///{distalign_home}/mlflow.db")
    experiment = client.get_experiment_by_name("distalign")
    runs = client.search_runs([experiment.experiment_id])
    (parent,) = [r for r in runs if r.info.run_name == "mini-samples"]
    children = sorted(
        (r for r in runs if r.data.tags.get(PARENT_TAG) == parent.info.run_id), key=lambda r: r.info.run_name
    )
    assert parent.info.status == "FINISHED"
    assert [r.info.run_name for r in children] == ["mini-samples-000", "mini-samples-001"]
    for row, child in zip(rows, children):
        languages = child.data.tags["distalign.study.languages"].split()
        assert languages == row["languages"].split() and len(languages) == 3 and not {"fi", "tr"} & set(languages)
        assert float(child.data.tags["distalign.study.d_typ"]) == pytest.approx(row["d_typ"])
        assert json.loads(child.data.params["data.constraint_languages"].replace("'", '"')) == languages
        # selection on the validation pair en-de; the test pair fi-tr is scored once, from the selected checkpoint
        assert child.data.params["eval.languages"] == "['en', 'de']"
        assert child.data.params["eval.test_languages"] == "['fi', 'tr']"
        assert {k for k in child.data.metrics if k.startswith("eval/bli/")} == {
            "eval/bli/en-de/mrr",
            "eval/bli/avg/mrr",
        }
        assert {k for k in child.data.metrics if k.startswith("test/")} == {
            "test/bli/fi-tr/mrr",
            "test/bli/avg/mrr",
            "test/step",
        }
        assert row["test/bli/avg/mrr"] == pytest.approx(child.data.metrics["test/bli/fi-tr/mrr"])
        assert [m.step for m in client.get_metric_history(child.info.run_id, "test/bli/avg/mrr")] == [
            int(child.data.metrics["test/step"])
        ]
        selection = {m.step: m.value for m in client.get_metric_history(child.info.run_id, SELECTION_METRIC)}
        checkpointed = {s: v for s, v in selection.items() if s > 0}  # step 0 (vanilla) has no checkpoint
        assert child.data.metrics["test/step"] == max(checkpointed, key=checkpointed.get)
        # the same score recomputed here from the run's best checkpoint and the trial's test pairs
        best_dir = Path(child.data.tags[BEST_CHECKPOINT_TAG])
        assert read_state(best_dir).step == child.data.metrics["test/step"]
        config = trials[row["trial"]]
        model, tokenizer = load_encoder(str(best_dir / MODEL_DIR))
        recomputed = evaluate_bli(
            model,
            tokenizer,
            bli_test_sets(config, prepare_data(config).test_pairs),
            in_loop_settings(config.eval, config.model, seed=config.train.seed),
        )
        assert recomputed == {
            "eval/bli/fi-tr/mrr": pytest.approx(child.data.metrics["test/bli/fi-tr/mrr"]),
            "eval/bli/avg/mrr": pytest.approx(row["test/bli/avg/mrr"]),
        }
    # both samples start from one tiny model (built once, from every word of the world) and pay its start-up once
    assert len({child.data.tags[START_MODEL_TAG] for child in children}) == 1
    assert all(
        sum(v for k, v in child.data.metrics.items() if k.startswith("startup/") and k != "startup/total_s")
        == pytest.approx(child.data.metrics["startup/total_s"])
        for child in children
    )
    assert 0 < parent.data.metrics["study/trial_startup_share"] <= 1
    best = max(r.data.metrics["test/bli/avg/mrr"] for r in children)
    assert parent.data.metrics["best/test/bli/avg/mrr"] == pytest.approx(best)
    scored_from = {c.data.tags[BEST_CHECKPOINT_TAG] for c in children if c.data.metrics["test/bli/avg/mrr"] == best}
    assert parent.data.tags["distalign.best_checkpoint"] in scored_from  # the checkpoint the best score comes from
    assert parent.data.tags["distalign.best_checkpoint"].startswith(str(distalign_home / "runs" / "mini-samples-"))
    # every artifact of the parent comes back through the client
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"trials.csv", "trials.json", "trials.png", "diversity.png", "pairs.png"} <= artifacts
    for name in sorted(artifacts):
        local = client.download_artifacts(parent.info.run_id, name, str(tmp_path / "artifacts"))
        content = open(local, "rb").read()
        assert content.startswith(PNG) if name.endswith(".png") else len(content) > 20, name

    again = run_study(study)  # Tune restores the finished study
    assert [(r["trial"], r["test/bli/avg/mrr"]) for r in again] == [(r["trial"], r["test/bli/avg/mrr"]) for r in rows]
    runs = client.search_runs([experiment.experiment_id])
    assert len([r for r in runs if r.data.tags.get(PARENT_TAG) == parent.info.run_id]) == 2  # nothing ran twice


def test_optuna_search_with_asha_reports_every_evaluation(ray_local, distalign_home, tmp_path, capfd):
    """Optuna suggests learning rates from a log-uniform space; ASHA sees every in-loop evaluation (3 per trial).
    Under `distalign tune`'s quiet console the study prints a few lines per trial, without ANSI codes. The best
    trial's model is registered (tracking.registered_model_name)."""
    study = tmp_path / "search.yaml"
    study.write_text(
        yaml.safe_dump(
            {
                "study": "mini-search",
                "base": str(QUICKSTART),
                "overrides": SMALL
                + [
                    "train.max_steps=6",
                    "train.checkpoint_every=6",
                    "eval.every=2",
                    "train.num_workers=1",
                    "tracking.registered_model_name=mini-search-best",
                ],
                "search": {
                    "space": {"train.lr": {"loguniform": [1.0e-4, 1.0e-2]}},
                    "num_samples": 2,
                    "scheduler": "asha",
                    "grace_period": 2,
                    "reduction_factor": 2,
                },
                "metric": "eval/bli/avg/mrr",
                "mode": "max",
                "max_concurrent_trials": 2,
            }
        )
    )
    capfd.readouterr()
    with quiet_console(tmp_path / "tune.log", worker_lines="warnings"):
        rows = run_study(study)
    console = capfd.readouterr().out.splitlines()
    assert len(rows) == 2 and all(not r["error"] for r in rows)
    # distalign's lines, then the summary table (a header and a row per trial) and the trial overhead line
    assert len(console) < 30 and not any("\x1b" in line for line in console), console
    assert len([line for line in console if not line.startswith("[distalign]")]) == len(rows) + 2, console
    assert sum(line.startswith("[distalign] trial ") for line in console) >= 2 * 3, console  # started, steps, end
    assert "View detailed results here" in (tmp_path / "tune.log").read_text()  # Tune's output went to the log
    assert all(1e-4 <= r["train.lr"] <= 1e-2 for r in rows) and rows[0]["train.lr"] != rows[1]["train.lr"]

    client = MlflowClient(f"sqlite:///{distalign_home}/mlflow.db")
    experiment = client.get_experiment_by_name("distalign")
    runs = client.search_runs([experiment.experiment_id])
    (parent,) = [r for r in runs if r.info.run_name == "mini-search"]
    children = [r for r in runs if r.data.tags.get(PARENT_TAG) == parent.info.run_id]
    assert sorted(r.info.run_name for r in children) == sorted(r["trial"] for r in rows)
    for child in children:
        lr = float(child.data.params["train.lr"])
        assert float(child.data.tags["distalign.study.train.lr"]) == pytest.approx(lr)
        # evaluated at steps 0, 2, 4 (and 6 unless ASHA stopped it after its grace period of 2 reports)
        steps = [m.step for m in client.get_metric_history(child.info.run_id, "eval/bli/avg/mrr")]
        assert steps[:3] == [0, 2, 4]
        # a trial ASHA stopped has its run closed as KILLED, tagged with the step of the result it was stopped on
        # (it may have evaluated once more before the stop reached it)
        stopped = child.data.tags.get(STOPPED_EARLY_TAG)
        if child.info.status == "KILLED":
            assert stopped is not None and int(stopped) in steps[1:]
        else:
            assert (child.info.status, stopped, steps[-1]) == ("FINISHED", None, 6)
    # the study's best trial, and it alone (trials register nothing), is the registered model's one version
    (version,) = client.search_model_versions("name = 'mini-search-best'")
    best = client.get_run(parent.info.run_id).data.tags["distalign.best_trial"]
    assert client.get_run(version.run_id).info.run_name == best


def test_a_one_worker_trial_trains_in_its_process_resumes_after_a_kill_and_matches_a_worker_group(
    ray_local, distalign_home, tmp_path
):
    """A one-worker trial trains in the trial's process (``train.trial_in_process``), with its own checkpoint
    store: killed mid-run, Tune starts it again and it resumes from the store, and every logged loss is the one a
    Ray Train worker group of one logs for the same config. A worker group then resumes from the store too."""
    from test_recovery import kill_a_worker_once_past, losses_by_step

    base = SMALL + [
        "train.max_steps=20",
        "train.checkpoint_every=4",
        "train.log_every=1",
        "eval.every=0",
        "train.num_workers=1",
    ]
    reference_config = load_config(QUICKSTART, base + ["run.name=worker-group-of-one"])
    reference = run_training(reference_config)  # no trial_report: a Ray Train worker group
    client = MlflowClient(reference_config.tracking.uri)
    study = tmp_path / "killed.yaml"
    study.write_text(
        yaml.safe_dump(
            {
                "study": "in-process",
                "base": str(QUICKSTART),
                "overrides": base,
                "grid": {"train.seed": [0]},
                "max_failures": 1,
            }
        )
    )
    killed: list[int] = []
    killer = threading.Thread(
        target=kill_a_worker_once_past,
        args=(client, reference_config.tracking.experiment, "in-process-000", 6, killed, 300, "ImplicitFunc", 0),
        daemon=True,
    )
    killer.start()
    rows = run_study(study)
    killer.join(timeout=5)

    assert killed, "no trial process was killed"
    assert [(r["trial"], r["error"]) for r in rows] == [("in-process-000", "")]
    (trial,) = [
        r
        for r in client.search_runs([client.get_experiment_by_name("distalign").experiment_id])
        if r.info.run_name == "in-process-000"
    ]
    expected, got = losses_by_step(client, reference.run_id), losses_by_step(client, trial.info.run_id)
    assert sorted(got) == sorted(expected) == list(range(1, 21))
    # the restarted trial resumed from a stored checkpoint, not from 0: step 1 was trained once, and so was the
    # start-up (logged by a fresh start only); a step after the checkpoint shows twice when its loss reached MLflow
    # before the kill (the logger's queue dies with the process)
    assert len(got[1]) == 1 and len(client.get_metric_history(trial.info.run_id, "startup/total_s")) == 1
    assert all(step > 4 for step, values in got.items() if len(values) > 1)
    for step, values in got.items():
        assert all(v == pytest.approx(expected[step][0], abs=1e-4) for v in values), (step, values, expected[step])
    # retention (keep_checkpoints 2, by the selection score; the rules by hand in test_checkpoint_store.py): the
    # latest is kept beside the 2 best, so a third checkpoint stays only when the latest scores below both others
    stored = sorted((distalign_home / "runs" / "in-process-000").glob("checkpoint_*"))
    score = {read_state(p).step: json.loads((p / REPORTED_FILE).read_text())[SELECTION_METRIC] for p in stored}
    kept = sorted(score)
    assert kept[-1] == 20 and len(kept) in (2, 3), score
    assert len(kept) == 2 or score[20] < min(score[s] for s in kept[:-1]), score
    assert trial.data.tags[CHECKPOINT_TAG] == str(stored[-1]) and read_state(stored[-1]).step == 20

    # the same run on a Ray Train worker group, 2 steps further: it resumes from what the trial stored
    _, trials = load_study(study)
    further = trials["in-process-000"]
    further.train.max_steps = 22
    outcome = run_training(further)
    assert outcome.run_id == trial.info.run_id
    assert sorted(losses_by_step(client, outcome.run_id)) == list(range(1, 23))
    assert [len(v) for s, v in losses_by_step(client, outcome.run_id).items() if s > 20] == [1, 1]
