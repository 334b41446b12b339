"""``distalign eval --tasks udpos,...``: transfer tasks routed to the transfer runner with the transfer flags; bad
input fails before Ray; a checkpoint's training run known to the store receives the values (no Ray here)."""

import pytest
from mlflow.tracking import MlflowClient
from transfer_data import save_task, tiny_model

import distalign.ray_session
from distalign.cli import build_parser, main
from distalign.eval.checkpoint_eval import ModelUnderTest
from distalign.transfer.zero_shot import checkpoint_run, spec_from_args


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("eval_route")
    for lang in ("en", "de"):
        save_task(root / "data", "udpos", lang, sizes=(8, 4, 4))
    return root, str(tiny_model(root / "model"))


def test_eval_flags_reach_the_transfer_spec(workspace):
    root, model = workspace
    args = build_parser().parse_args(
        [
            "eval",
            "--model",
            model,
            "--tasks",
            "bli,udpos",
            "--data-dir",
            str(root / "data"),
            "--seeds",
            "2",
            "--source",
            "en",
            "--lr",
            "1e-3",
            "--output-dir",
            str(root / "out"),
            "--no-mlflow",
        ]
    )
    spec = spec_from_args(args, args.model, ["udpos"])
    assert (spec.model, spec.tasks, spec.seeds, spec.source, spec.finetune.lr) == (model, ("udpos",), 2, "en", 1e-3)
    assert spec.data_dir == str(root / "data") and spec.output_dir == str(root / "out")
    assert not spec.tracking.enabled


@pytest.mark.parametrize(
    "argv, error",
    [
        (["--tasks", "udpos", "--langs", "de,sw"], "udpos: no test data for language sw"),
        (["--tasks", "udpos,nope"], "suite.tasks[0]: 'nope' is not one of"),  # the evaluation's own check
        (["--tasks", "udpos", "--seeds", "0"], "seeds, num_workers: must be >= 1"),
        # the evaluation's files are read before the transfer's fine-tuning, not after it (seen on Ray: 12 minutes)
        (["--tasks", "bli,udpos", "--eval-dir", "/nonexistent"], "suite.eval_dir (--eval-dir): directory not found"),
    ],
)
def test_bad_input_fails_before_ray(workspace, monkeypatch, capsys, argv, error):
    root, model = workspace
    monkeypatch.setattr(distalign.ray_session, "ensure_ray", lambda: pytest.fail("Ray was started"))
    assert main(["eval", "--model", model, "--data-dir", str(root / "data"), "--no-mlflow", *argv]) == 2
    assert error in capsys.readouterr().err


def test_transfer_tasks_need_a_model(capsys):
    assert main(["eval", "--tasks", "udpos", "--data-dir", "x"]) == 2
    assert "transfer tasks need --checkpoint or --model" in capsys.readouterr().err


def test_values_go_into_the_checkpoint_run_the_store_knows(workspace, tmp_path):
    root, model = workspace
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    run_id = client.create_run(client.create_experiment("training")).info.run_id
    spec = spec_from_args(
        build_parser().parse_args(["eval", "--model", model, "--tasks", "udpos", "--tracking-uri", uri]),
        model,
        ["udpos"],
    )
    assert checkpoint_run(spec, ModelUnderTest(model, "m", run_id, 40)) == (run_id, 40)
    assert checkpoint_run(spec, ModelUnderTest(model, "m", "0" * 32, 40)) is None  # trained against another store
    assert checkpoint_run(spec, ModelUnderTest(model, "m")) is None  # not a checkpoint
