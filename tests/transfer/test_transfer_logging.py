"""The transfer results logged into an existing run (a training run, at its checkpoint's step) through the MLflow
client, from hand-made fine-tuning results (no Ray)."""

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from distalign.eval.checkpoint_eval import ModelUnderTest
from distalign.tracking import PARENT_TAG
from distalign.transfer.protocol import seed_rows, summarise
from distalign.transfer.zero_shot import TransferSpec, log_to_mlflow, write_predictions


def test_values_land_in_the_given_run_at_its_step(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    training = client.create_run(client.create_experiment("training")).info.run_id
    results = [
        {
            "task": "udpos",
            "seed": seed,
            "selected_step": 2,
            "settings": {"lr": 1e-3},
            "trained": "all parameters",
            "history": [{"step": 2, "selection": 0.5, "train_loss": 1.0, "dev": {"xa": {"acc": 0.5}}}],
            "test": {"xa": {"acc": 0.9}, "xb": {"acc": 0.4 + 0.1 * seed}},
            "predictions": {
                lang: [{"id": 0, "gold": ["NOUN", "VERB"], "predicted": ["NOUN", "NOUN"]}] for lang in ("xa", "xb")
            },
        }
        for seed in (0, 1)
    ]
    for result in results:
        write_predictions(result, tmp_path / "out")
    assert (
        tmp_path / "out" / "predictions" / "udpos" / "seed1" / "xb.jsonl"
    ).read_text() == '{"id": 0, "gold": ["NOUN", "VERB"], "predicted": ["NOUN", "NOUN"]}\n'
    per_seed = pd.DataFrame([row for r in results for row in seed_rows(r, "xa", "acc")])
    summary = summarise(per_seed)
    (tmp_path / "plot.png").write_bytes(b"png")
    spec = TransferSpec(model="m", tasks=("udpos",), source="xa", seeds=2)
    spec.tracking.uri = uri
    assert (
        log_to_mlflow(
            spec, ModelUnderTest("m", "m"), [], results, per_seed, summary, [tmp_path / "plot.png"], into=(training, 40)
        )
        == training
    )
    history = client.get_metric_history(training, "transfer/udpos/xb/acc")
    assert [(m.step, m.value) for m in history] == [(40, pytest.approx(0.45))]  # the step given, not the dev's
    assert client.get_run(training).data.metrics["transfer/udpos/xb/acc_std"] == pytest.approx(0.0707107, abs=1e-6)
    assert client.get_run(training).data.params == {}  # a training run's params are its config's
    assert {a.path for a in client.list_artifacts(training, "transfer/step_40")} == {
        "transfer/step_40/plot.png",
        "transfer/step_40/transfer_summary.json",
    }
    children = client.search_runs([client.get_run(training).info.experiment_id], f"tags.`{PARENT_TAG}` = '{training}'")
    assert sorted(c.data.params["seed"] for c in children) == ["0", "1"]
    for child in children:  # each fine-tuning run's test predictions
        assert {a.path for a in client.list_artifacts(child.info.run_id, "predictions")} == {
            "predictions/xa.jsonl",
            "predictions/xb.jsonl",
        }
