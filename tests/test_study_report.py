"""A study's summary on its MLflow parent run (sqlite store, child runs made by hand): the trial table, mean ±
std per configuration over seeds, Spearman's ρ against d_typ, the size plot and the best trial's checkpoint."""

import json

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from distalign.studies.study import LanguageSampleStudy, StudyConfig
from distalign.studies.study_results import log_study_summary
from distalign.tracking import PARENT_TAG


@pytest.fixture
def client(tmp_path):
    return MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")


def study_runs(client, names, metrics_of):
    """A parent run and one child per trial name, each child with its metric history."""
    experiment = client.create_experiment("studies")
    parent = client.create_run(experiment, run_name="study").info.run_id
    for name in names:
        child = client.create_run(
            experiment,
            run_name=name,
            start_time=1_000_000,
            tags={PARENT_TAG: parent, "distalign.checkpoint": f"/ckpt/{name}"},
        )
        for key, step, value in metrics_of(name):
            client.log_metric(child.info.run_id, key, value, step=step)
        client.set_terminated(child.info.run_id, end_time=1_100_000)  # 100 s per trial
    return parent


def artifact(client, run_id, name, tmp_path):
    return client.download_artifacts(run_id, name, str(tmp_path))


def test_seeds_give_mean_and_std_per_size_and_the_size_plot(client, tmp_path):
    study = StudyConfig(study="sizes", grid={"data.max_constraints": [100, 0], "train.seed": [0, 1]})
    values = {"t0": (100, 0, 0.20), "t1": (100, 1, 0.30), "t2": (0, 0, 0.50), "t3": (0, 1, 0.70)}
    # each seed has its own vanilla model: 0.1 for seed 0, 0.2 for seed 1; 20 + 5 s of each trial before its first step
    parent = study_runs(
        client,
        values,
        lambda n: [
            ("eval/bli/avg/mrr", 0, 0.1 + 0.1 * values[n][1]),
            ("eval/bli/avg/mrr", 40, values[n][2]),
            ("eval/bli/xa-xb/mrr", 40, values[n][2]),
            ("startup/prepare_s", 1, 20.0),
            ("startup/ray_s", 1, 5.0),
            ("startup/total_s", 1, 25.0),
        ],
    )
    rows = [
        {"trial": n, "data.max_constraints": s, "train.seed": seed, "eval/bli/avg/mrr": v, "error": ""}
        for n, (s, seed, v) in values.items()
    ]
    log_study_summary(client, parent, study, rows)

    run = client.get_run(parent)
    assert run.data.metrics["best/eval/bli/avg/mrr"] == 0.7
    assert run.data.tags["distalign.best_trial"] == "t3" and run.data.tags["distalign.best_checkpoint"] == "/ckpt/t3"
    names = {a.path for a in client.list_artifacts(parent)}
    assert {
        "trials.csv",
        "trials.json",
        "trials.png",
        "configurations.csv",
        "configurations.png",
        "sizes.png",
        "pairs.png",
    } <= names
    summary = pd.read_csv(artifact(client, parent, "configurations.csv", tmp_path)).set_index("data.max_constraints")
    assert summary.loc[100, "mean"] == pytest.approx(0.25) and summary.loc[0, "mean"] == pytest.approx(0.6)
    assert summary.loc[0, "std"] == pytest.approx(0.1414, abs=1e-4)  # sample std of 0.5 and 0.7
    # gains over each seed's own vanilla model: 0.5 - 0.1 and 0.7 - 0.2
    assert summary.loc[100, "gain_mean"] == pytest.approx(0.1) and summary.loc[100, "gain_std"] == pytest.approx(0)
    assert summary.loc[0, "gain_mean"] == pytest.approx(0.45) and summary.loc[0, "gain_std"] == pytest.approx(
        0.0707, abs=1e-4
    )
    trials = pd.read_csv(artifact(client, parent, "trials.csv", tmp_path)).set_index("trial")
    # a trial's wall time: its run's 100 s and the 20 + 5 s of prepare and ray before the run opened, the span
    # startup/total_s counts from (a share of the run's 100 s alone could pass 1 on a slow start-up)
    assert trials.loc["t3", ["vanilla", "gain", "startup_s", "wall_s"]].tolist() == pytest.approx([0.2, 0.5, 25, 125])
    overhead = {k: v for k, v in run.data.metrics.items() if k.startswith("study/")}
    assert overhead == pytest.approx(
        {
            "study/trial_startup_s_mean": 25,
            "study/trial_wall_s_mean": 125,
            "study/trial_startup_share": 0.2,
            "study/startup/prepare_s": 20,
            "study/startup/ray_s": 5,
        }
    )
    table = json.loads(open(artifact(client, parent, "trials.json", tmp_path)).read())
    assert table["columns"][:2] == ["trial", "data.max_constraints"] and len(table["data"]) == 4
    for name in ("sizes.png", "trials.png", "pairs.png"):
        assert open(artifact(client, parent, name, tmp_path), "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_language_samples_give_spearman_against_d_typ(client, tmp_path):
    study = StudyConfig(study="samples", language_samples=LanguageSampleStudy(size=3))
    diversity = {"s0": 0.1, "s1": 0.2, "s2": 0.3, "s3": 0.4}
    scores = {"s0": 0.4, "s1": 0.3, "s2": 0.2, "s3": 0.1}  # falls as d_typ rises: rho = -1
    parent = study_runs(client, diversity, lambda n: [("eval/bli/fi-tr/mrr", 40, scores[n])])
    rows = [
        {
            "trial": n,
            "languages": "de en fr",
            "d_typ": d,
            "sim_train_test": 0.6 + d / 10,
            "bin": i,
            "eval/bli/avg/mrr": scores[n],
            "error": "",
        }
        for i, (n, d) in enumerate(diversity.items())
    ]
    log_study_summary(client, parent, study, rows)
    metrics = client.get_run(parent).data.metrics
    assert metrics["study/spearman_d_typ"] == pytest.approx(-1.0)
    assert metrics["study/spearman_d_typ_p"] < 0.01
    assert "diversity.png" in {a.path for a in client.list_artifacts(parent)}


def test_a_transfer_metric_gives_the_per_language_table_and_plot(client, tmp_path):
    metric = "transfer/udpos/avg/acc"
    study = StudyConfig(study="transfer", grid={"train.lr": [1e-3, 1e-2]}, metric=metric)
    scores = {"t0": {"xa": 0.9, "xb": 0.4}, "t1": {"xa": 0.8, "xb": 0.6}}

    def metrics_of(name):  # the starting model at step 0 (the same for both), the trained one at step 6
        out = []
        for step, langs in ((0, {"xa": 0.5, "xb": 0.3}), (6, scores[name])):
            avg = sum(langs.values()) / 2
            out += [(f"transfer/udpos/{lang}/acc", step, v) for lang, v in langs.items()]
            out += [
                (metric, step, avg),
                (f"{metric}_std", step, 0.01),
                ("transfer/udpos/xb/delta", step, langs["xa"] - langs["xb"]),
            ]
        return out + [("transfer/udpos/dev/xa/acc", 3, 0.1)]  # would be a fine-tuning run's: left out

    parent = study_runs(client, scores, metrics_of)
    rows = [
        {"trial": n, "train.lr": lr, metric: sum(s.values()) / 2, "error": ""}
        for (n, s), lr in zip(scores.items(), (1e-3, 1e-2))
    ]
    log_study_summary(client, parent, study, rows)
    run = client.get_run(parent)
    assert run.data.tags["distalign.best_trial"] == "t1" and run.data.metrics[f"best/{metric}"] == pytest.approx(0.7)
    names = {a.path for a in client.list_artifacts(parent)}
    assert {"transfer_languages.csv", "transfer_languages.json", "transfer_udpos.png"} <= names
    assert "pairs.png" not in names
    table = pd.read_csv(artifact(client, parent, "transfer_languages.csv", tmp_path))
    value = {(r.trial, r.lang, r.metric): (r.mean, r.std) for r in table.itertuples()}
    assert value["t0", "xb", "acc"] == (pytest.approx(0.4), 0.0)
    assert value["t1", "avg", "acc"] == (pytest.approx(0.7), 0.01)
    assert value["start (t1)", "xb", "acc"][0] == pytest.approx(0.3)  # the best trial's step-0 values
    assert value["t1", "xb", "delta"][0] == pytest.approx(0.2)
    trials = pd.read_csv(artifact(client, parent, "trials.csv", tmp_path)).set_index("trial")
    assert trials.loc["t1", "gain"] == pytest.approx(0.7 - 0.4)  # over its own starting model (step 0)


def test_a_missing_lang2vec_leaves_the_distances_out_of_the_report(client, tmp_path, monkeypatch, caplog):
    import distalign.typology

    def no_lang2vec():
        raise ModuleNotFoundError("No module named 'pkg_resources'")

    monkeypatch.setattr(distalign.typology, "_lang2vec", no_lang2vec)
    study = StudyConfig(study="pairs", grid={"train.seed": [0]})
    parent = study_runs(client, ["t0"], lambda n: [("eval/bli/avg/mrr", 40, 0.5), ("eval/bli/de-en/mrr", 40, 0.5)])
    with caplog.at_level("WARNING", logger="distalign"):
        log_study_summary(
            client, parent, study, [{"trial": "t0", "train.seed": 0, "eval/bli/avg/mrr": 0.5, "error": ""}]
        )
    assert "pairs.png" in {a.path for a in client.list_artifacts(parent)}
    assert (
        "no URIEL distances in pairs.png (lang2vec cannot be imported: No module named 'pkg_resources')" in caplog.text
    )
