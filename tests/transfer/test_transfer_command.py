"""``distalign transfer`` end to end on Ray: a tiny model, Hub-schema fixtures, two tasks x two seeds, DDP."""

import json
import time

import pandas as pd
import pytest
from conftest import staged_by_ray_tasks
from transfer_data import save_task, tiny_model

from distalign.cli import main
from distalign.model_store.model_fetch import fetch_model
from distalign.tracking import client_for


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("transfer_cli")
    for task in ("xnli", "udpos"):
        for lang in ("en", "de", "fr"):
            save_task(root / "data", task, lang, sizes=(16, 6, 6), seed=hash(lang) % 7)
    return root, str(tiny_model(root / "model"))


def test_missing_language_fails_before_ray(workspace, monkeypatch, capsys):
    root, model = workspace
    import distalign.ray_session

    monkeypatch.setattr(distalign.ray_session, "ensure_ray", lambda: pytest.fail("Ray was started"))
    code = main(
        ["transfer", model, "--tasks", "xnli", "--data-dir", str(root / "data"), "--langs", "de,sw", "--no-mlflow"]
    )
    assert code == 2
    assert "xnli: no test data for language sw" in capsys.readouterr().err  # selection on en: sw's dev not needed
    code = main(
        [
            "transfer",
            model,
            "--tasks",
            "xnli",
            "--data-dir",
            str(root / "data"),
            "--langs",
            "de,sw",
            "--select-on",
            "target",
            "--no-mlflow",
        ]
    )
    assert code == 2 and "xnli: no validation data for language sw" in capsys.readouterr().err


def test_a_broken_adapter_config_is_refused_before_ray(workspace, tmp_path, monkeypatch, capsys):
    import shutil

    import distalign.ray_session

    root, model = workspace
    adapted = shutil.copytree(model, tmp_path / "adapted")
    (adapted / "adapters.json").write_text("{}")
    monkeypatch.setattr(distalign.ray_session, "ensure_ray", lambda: pytest.fail("Ray was started"))
    assert (
        main(
            [
                "transfer",
                str(adapted),
                "--tasks",
                "xnli",
                "--data-dir",
                str(root / "data"),
                "--batch-size",
                "8",
                "--no-mlflow",
            ]
        )
        == 2
    )
    assert "adapters.json: not an adapter config" in capsys.readouterr().err


def test_transfer_command_end_to_end(workspace, s3_endpoint, ray_local, tmp_path, capsys, monkeypatch):
    """UD-POS (the token family; the pair family runs in-process in test_transfer_finetune.py), 2 seeds as two
    TorchTrainer runs side by side, 2 DDP workers each, then the protocol's table, files and MLflow runs. The model
    is read from S3: the driver stages a copy for its checks, the fine-tuning workers their own on their node."""
    root, local_model = workspace
    model = "s3://ckpt/models/model"
    fetch_model(local_model, model, s3_endpoint[0])
    monkeypatch.setenv("DISTALIGN_STORAGE_ENDPOINT", s3_endpoint[0])
    monkeypatch.setenv("DISTALIGN_CACHE", str(tmp_path / "driver-cache"))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    free_before = ray_local.available_resources().get("CPU", 0)
    started = time.time()
    code = main(
        [
            "transfer",
            model,
            "--tasks",
            "udpos",
            "--data-dir",
            str(root / "data"),
            "--seeds",
            "2",
            "--epochs",
            "2",
            "--select-every",
            "0",
            "--batch-size",
            "8",
            "--lr",
            "1e-3",
            "--workers",
            "2",
            "--cpus-per-worker",
            "0.5",
            "--output-dir",
            str(tmp_path / "out"),
            "--tracking-uri",
            uri,
        ]
    )
    elapsed = time.time() - started
    out = capsys.readouterr().out
    with capsys.disabled():
        print(out + f"\n1 task x 2 seeds, 2 workers each: {elapsed:.1f} s")
    assert code == 0
    assert "weights selected on source dev" in out and "udpos (acc x 100, mean ± std over 2 seeds" in out
    assert staged_by_ray_tasks(tmp_path / "driver-cache")
    summary = pd.read_csv(tmp_path / "out" / "summary.csv")
    per_seed = pd.read_csv(tmp_path / "out" / "per_seed.csv")
    runs = json.loads((tmp_path / "out" / "runs.json").read_text())["runs"]
    assert sorted((r["task"], r["seed"]) for r in runs) == [("udpos", 0), ("udpos", 1)]
    for run in runs:
        assert run["workers"] == 2 and run["steps"] == 4  # 16 examples / batch 8 x 2 epochs
        assert [h["step"] for h in run["history"]] == [2, 4]  # --select-every 0: each epoch's end
        best = max(run["history"], key=lambda h: h["selection"])  # the first of equals
        assert run["selected_step"] == best["step"]  # the source dev set's best
        assert list(run["history"][0]["dev"]) == ["en"]
        assert set(run["test"]) == {"en", "de", "fr"}
        predictions = (tmp_path / "out" / "predictions" / "udpos" / f"seed{run['seed']}" / "de.jsonl").read_text()
        assert run["predictions_dir"].endswith(f"seed{run['seed']}") and len(predictions.splitlines()) == 6
    # the summary is the mean over the seeds' rows
    de = per_seed[(per_seed.lang == "de") & (per_seed.metric == "acc")]["value"]
    row = summary[(summary.lang == "de") & (summary.metric == "acc")].iloc[0]
    assert len(de) == 2 and row["mean"] == pytest.approx(de.mean()) and row["n"] == 2

    client = client_for(uri)
    (parent,) = client.search_runs(
        [client.get_experiment_by_name("distalign-transfer").experiment_id], "attributes.run_name = 'transfer-model'"
    )
    metrics = parent.data.metrics
    assert parent.data.params["model"] == model  # where the model is, not the driver's copy
    assert {
        "transfer/udpos/avg/acc",
        "transfer/udpos/avg/delta",
        "transfer/udpos/de/acc",
        "transfer/udpos/de/delta",
        "transfer/udpos/fr/acc",
        "transfer/udpos/avg/acc_std",
    } <= set(metrics)
    assert metrics["transfer/udpos/de/acc"] == pytest.approx(row["mean"])
    children = client.search_runs([parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    assert len(children) == 2
    assert {c.data.tags["distalign.selected_step"] for c in children} <= {"2", "4"}
    assert "transfer_summary.json" in {a.path for a in client.list_artifacts(parent.info.run_id)}
    # the runs gave back what they held: no Train controller lives on with its placement group's CPUs
    deadline = time.time() + 30
    while ray_local.available_resources().get("CPU", 0) < free_before and time.time() < deadline:
        time.sleep(1)
    assert ray_local.available_resources().get("CPU", 0) == pytest.approx(free_before)


def test_eval_command_with_bli_and_a_transfer_task_logs_child_runs_of_the_checkpoint_run(
    workspace, ray_local, tmp_path, capsys
):
    """``distalign eval --checkpoint ... --tasks bli,udpos`` on Ray: the transfer's table (per language, Δ, mean ±
    std over 2 seeds), then BLI, each logged as a child run of the checkpoint's training run, at its step; the
    training run itself is left as it was."""
    import shutil

    from transfer_data import LEXICON

    from distalign.checkpoint import MODEL_DIR, TrainerState, write_state

    root, model = workspace
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = client_for(uri)
    run_id = client.create_run(client.create_experiment("training"), run_name="trained").info.run_id
    checkpoint = tmp_path / "checkpoint_000007"
    shutil.copytree(model, checkpoint / MODEL_DIR)
    write_state(checkpoint, TrainerState(step=7, mlflow_run_id=run_id))
    dictionary = tmp_path / "en-de.tsv"
    dictionary.write_text(
        "".join(f"{a}\t{b}\n" for en, de in zip(LEXICON["en"], LEXICON["de"]) for a, b in zip(en, de))
    )
    (tmp_path / "eval").mkdir()
    started = time.time()
    code = main(
        [
            "eval",
            "--checkpoint",
            str(checkpoint),
            "--tasks",
            "bli,udpos",
            "--eval-dir",
            str(tmp_path / "eval"),
            "--bli-pairs",
            "",
            "--dictionary",
            f"en-de:{dictionary}",
            "--layer",
            "-1",
            "--cpus-per-task",
            "0.5",
            "--data-dir",
            str(root / "data"),
            "--langs",
            "de",
            "--seeds",
            "2",
            "--epochs",
            "1",
            "--batch-size",
            "8",
            "--lr",
            "1e-3",
            "--cpus-per-worker",
            "0.5",
            "--output-dir",
            str(tmp_path / "out"),
            "--tracking-uri",
            uri,
        ]
    )
    out = capsys.readouterr().out
    with capsys.disabled():
        print(out[-1500:] + f"\neval: bli + udpos x 2 seeds: {time.time() - started:.1f} s")
    assert code == 0
    assert "udpos (acc x 100, mean ± std over 2 seeds; Δ = en - language)" in out
    assert all(line in out for line in ("      en  acc", "      de  acc", "     avg  acc")) and "Δ" in out
    assert client.get_run(run_id).data.metrics == {} and client.list_artifacts(run_id) == []
    experiment = client.get_experiment_by_name("training").experiment_id
    children = {
        run.info.run_name.split("-")[0]: run
        for run in client.search_runs([experiment], f"tags.`mlflow.parentRunId` = '{run_id}'")
    }
    assert set(children) == {"transfer", "eval"}  # the transfer's parent run and BLI's run
    transfer, bli = children["transfer"], children["eval"]
    assert {"transfer/udpos/de/acc", "transfer/udpos/de/delta", "transfer/udpos/avg/acc_std"} <= set(
        transfer.data.metrics
    )
    assert "eval/bli/en-de/mrr" in bli.data.metrics
    for run, key in ((transfer, "transfer/udpos/de/acc"), (bli, "eval/bli/en-de/mrr")):  # at the checkpoint's step
        assert [m.step for m in client.get_metric_history(run.info.run_id, key)] == [7]
    seeds = client.search_runs([experiment], f"tags.`mlflow.parentRunId` = '{transfer.info.run_id}'")
    assert len(seeds) == 2  # one fine-tuning run per seed


def test_spec_from_flags_and_overrides():
    from distalign.cli import build_parser
    from distalign.transfer.zero_shot import spec_from_args

    args = build_parser().parse_args(
        [
            "transfer",
            "xlm-roberta-base",
            "finetune.epochs=1",
            "--tasks",
            "xnli,udpos",
            "--hub",
            "--hub-config",
            "udpos:de=de_hdt",
            "--langs",
            "de",
            "--seeds",
            "2",
            "--tydiqa-train",
            "tydiqa",
            "--tracking-uri",
            "sqlite:///x.db",
        ]
    )
    spec = spec_from_args(args)
    assert spec.model == "xlm-roberta-base" and spec.tasks == ("xnli", "udpos") and spec.hub
    assert spec.hub_configs == {"udpos:de": "de_hdt"} and spec.languages == ("de",) and spec.seeds == 2
    assert spec.finetune.epochs == 1 and spec.finetune.lr is None and spec.tydiqa_train == "tydiqa"
    assert spec.tracking.uri == "sqlite:///x.db" and spec.tracking.experiment == "distalign-transfer"
