"""``eval.transfer`` and a study selecting by a transfer metric: every bad setting is an error naming its key, found
when the config or study is loaded, before any Ray resources are taken (no Ray here)."""

import json
from pathlib import Path

import pytest
import yaml

from distalign.config import ConfigError, load_config
from distalign.studies import load_study
from distalign.transfer.training import check, transfer_spec

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = str(REPO / "jobs" / "configs" / "quickstart.yaml")
WORLD = ["data.synthetic.transfer_examples=8"]


def test_off_by_default_and_the_world_tasks_by_default():
    assert transfer_spec(load_config(QUICKSTART)) is None
    spec = transfer_spec(
        load_config(
            QUICKSTART,
            WORLD
            + [
                "eval.transfer.tasks=[udpos]",
                "eval.transfer.spec={seeds: 2, finetune: {lr: 1.0e-3}}",
                "eval.transfer.spec.finetune.epochs=4",
            ],
        ),
        "/world/transfer",
    )
    assert spec.tasks == ("udpos",) and spec.data_dir == "/world/transfer"
    assert spec.source == "xa"  # the world's first language, unless the spec names one
    assert (spec.seeds, spec.finetune.lr, spec.finetune.epochs) == (2, 1e-3, 4)


@pytest.mark.parametrize(
    "overrides, key",
    [
        (["eval.transfer.tasks=[udpos]"], r"eval\.transfer\.data_dir: is needed"),  # no world tasks, no folder
        (["eval.transfer.seeds=2"], r"unknown key 'eval\.transfer\.seeds'"),
        (WORLD + ["eval.transfer.spec={seeds: 2}"], r"eval\.transfer\.tasks: is empty"),
        (WORLD + ["eval.transfer.tasks=[udpos]", "eval.transfer.at_steps=[0]"], r"eval\.transfer\.at_steps"),
        (["eval.transfer.tasks=[xnli]", "eval.transfer.data_dir=/no/such/dir"], r"eval\.transfer\.data_dir: not a dir"),
        (WORLD + ["eval.transfer.tasks=[udpos]", "eval.transfer.checkpoint=first"], r"eval\.transfer\.checkpoint"),
    ],
)
def test_bad_sections_fail_when_loaded(overrides, key):
    with pytest.raises(ConfigError, match=key):
        load_config(QUICKSTART, overrides)


UDPOS = WORLD + ["eval.transfer.tasks=[udpos]"]


@pytest.mark.parametrize(
    "overrides, key",
    [
        (
            WORLD + ["eval.transfer.tasks=[xnli]"],
            r"eval\.transfer\.tasks\[0\]: 'xnli' is not one of \['udpos', 'pawsx'\]",
        ),
        (UDPOS + ["eval.transfer.spec={seedz: 2}"], r"unknown key 'eval\.transfer\.spec\.seedz'"),
        (UDPOS + ["eval.transfer.spec={seeds: two}"], r"eval\.transfer\.spec\.seeds"),
        (UDPOS + ["eval.transfer.spec={seeds: 0}"], r"eval\.transfer\.spec: seeds"),
        (UDPOS + ["eval.transfer.spec={data_dir: x}"], r"eval\.transfer\.spec\.data_dir: set by"),
    ],
)
def test_bad_specs_fail_when_loaded(overrides, key):
    """``load_config`` runs the check ``distalign.transfer.training`` registers (imported above)."""
    with pytest.raises(ConfigError, match=key):
        load_config(QUICKSTART, overrides)


def test_data_folder_tasks_and_languages_checked(tmp_path):
    (tmp_path / "xnli" / "en").mkdir(parents=True)
    with pytest.raises(ConfigError, match=r"eval\.transfer\.tasks\[1\]: 'nope' is not one of \['xnli'"):
        load_config(QUICKSTART, ["eval.transfer.tasks=[xnli,nope]", f"eval.transfer.data_dir={tmp_path}"])
    with pytest.raises(ConfigError, match=r"eval\.transfer: xnli: no target languages"):  # only the source's folder
        load_config(QUICKSTART, ["eval.transfer.tasks=[xnli]", f"eval.transfer.data_dir={tmp_path}"])
    (tmp_path / "xnli" / "de").mkdir()
    check(load_config(QUICKSTART, ["eval.transfer.tasks=[xnli]", f"eval.transfer.data_dir={tmp_path}"]))


def study_file(tmp_path, metric, overrides=(), **changes):
    path = tmp_path / "study.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "study": "s",
                "base": QUICKSTART,
                "grid": {"train.lr": [1.0e-3]},
                "overrides": WORLD + list(overrides),
                "metric": metric,
                "mode": "max",
            }
            | changes
        )
    )
    return path


def test_a_study_may_select_by_a_transfer_metric(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path))
    with_udpos = ["eval.transfer.tasks=[udpos]"]
    study, trials = load_study(study_file(tmp_path, "transfer/udpos/avg/acc", with_udpos))
    assert study.metric == "transfer/udpos/avg/acc" and len(trials) == 1
    with pytest.raises(ConfigError, match=r"metric: transfer/pawsx/avg/acc: trial s-000 does not transfer to pawsx"):
        load_study(study_file(tmp_path, "transfer/pawsx/avg/acc", with_udpos))
    with pytest.raises(ConfigError, match=r"metric: transfer/udpos/acc: a transfer metric is transfer/<task>"):
        load_study(study_file(tmp_path, "transfer/udpos/acc", with_udpos))
    with pytest.raises(ConfigError, match=r"metric: transfer/udpos/avg/acc is scored once, after training.*use a grid"):
        load_study(
            study_file(
                tmp_path,
                "transfer/udpos/avg/acc",
                with_udpos,
                grid={},
                search={"space": {"train.lr": {"loguniform": [1.0e-4, 1.0e-2]}}},
            )
        )
    with pytest.raises(ConfigError, match=r"trial s-000: eval\.transfer\.tasks\[0\]: 'xnli'"):
        load_study(study_file(tmp_path, "eval/bli/avg/mrr", ["eval.transfer.tasks=[xnli]"]))


def test_shipped_transfer_study_loads(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path))
    study, trials = load_study(REPO / "tuning" / "transfer_tiny.yaml")
    assert (study.metric, study.mode, len(trials)) == ("transfer/udpos/avg/delta", "min", 2)
    spec = transfer_spec(next(iter(trials.values())), "/world")
    assert (spec.tasks, spec.source, spec.seeds, spec.finetune.epochs) == (("udpos",), "xa", 2, 5)


def test_models_are_the_start_the_chosen_steps_and_the_selected_checkpoint(tmp_path):
    from types import SimpleNamespace

    from distalign.checkpoint import TrainerState, write_state
    from distalign.tracking import START_MODEL_TAG
    from distalign.transfer.training import models_to_transfer

    config = load_config(
        QUICKSTART,
        WORLD
        + [
            "eval.transfer.tasks=[udpos]",
            "eval.transfer.starting_model=true",
            "eval.transfer.at_steps=[2,4]",
            f"storage.path={tmp_path}",
            "run.name=r",
        ],
    )
    for step in (2, 4, 6):
        (tmp_path / "r" / f"checkpoint_{step}").mkdir(parents=True)
        write_state(tmp_path / "r" / f"checkpoint_{step}", TrainerState(step=step))
    run = SimpleNamespace(data=SimpleNamespace(tags={START_MODEL_TAG: "/cache/tiny-model"}))
    best, last = str(tmp_path / "r" / "checkpoint_4"), str(tmp_path / "r" / "checkpoint_6")
    models = models_to_transfer(config, run, SimpleNamespace(best_checkpoint=best, checkpoint=last))
    # step 4 is both an at_steps checkpoint and the selected one: transferred once, as the selected one
    assert models == [
        ("start", "/cache/tiny-model", 0),
        ("step 2", str(tmp_path / "r" / "checkpoint_2"), 2),
        ("step 4 (best)", best, 4),
    ]
    models = models_to_transfer(config, run, SimpleNamespace(best_checkpoint="", checkpoint=last))
    assert [m[2] for m in models] == [0, 2, 4, 6]  # nothing selected: the last
    # a starting model in storage stays a URI: each node that fine-tunes it stages its own copy (not the driver's)
    stored = SimpleNamespace(data=SimpleNamespace(tags={START_MODEL_TAG: "s3://bucket/models/start"}))
    assert models_to_transfer(config, stored, SimpleNamespace(best_checkpoint="", checkpoint=last))[0] == (
        "start",
        "s3://bucket/models/start",
        0,
    )
    config = load_config(
        QUICKSTART,
        WORLD + ["eval.transfer.tasks=[udpos]", "eval.transfer.at_steps=[3]", f"storage.path={tmp_path}", "run.name=r"],
    )
    with pytest.raises(ConfigError, match=r"eval\.transfer\.at_steps: no checkpoint of step 3 is kept \(kept: \[2, 4"):
        models_to_transfer(config, run, SimpleNamespace(best_checkpoint=best, checkpoint=last))


def test_at_steps_with_remote_storage_downloads_the_kept_checkpoints(s3_endpoint, tmp_path):
    """With S3 storage (moto's server) the kept checkpoints are listed in the bucket, read by their trainer state,
    and each one transferred is a downloaded copy (formerly refused at load: "reads the run's checkpoints from local
    storage"); a checkpoint still without its state is not kept."""
    from dataclasses import asdict
    from types import SimpleNamespace

    from distalign.checkpoint import STATE_FILE, TrainerState, read_state
    from distalign.tracking import START_MODEL_TAG
    from distalign.transfer.training import kept_checkpoints, models_to_transfer

    url, s3 = s3_endpoint
    for step in (2, 4, 6):
        prefix = f"runs/at-steps/checkpoint_00000{step}"
        s3.put_object(Bucket="ckpt", Key=f"{prefix}/{STATE_FILE}", Body=json.dumps(asdict(TrainerState(step=step))))
        s3.put_object(Bucket="ckpt", Key=f"{prefix}/model/config.json", Body=f'{{"step": {step}}}')
    s3.put_object(Bucket="ckpt", Key="runs/at-steps/checkpoint_000008/model/config.json", Body="{}")  # no state yet
    config = load_config(
        QUICKSTART,
        UDPOS
        + [
            "eval.transfer.at_steps=[2]",
            "storage.path=s3://ckpt/runs",
            f"storage.endpoint_url={url}",
            "run.name=at-steps",
        ],
    )
    assert kept_checkpoints(config) == {step: f"s3://ckpt/runs/at-steps/checkpoint_00000{step}" for step in (2, 4, 6)}
    run = SimpleNamespace(data=SimpleNamespace(tags={START_MODEL_TAG: "/cache/tiny-model"}))
    models = models_to_transfer(
        config, run, SimpleNamespace(best_checkpoint="", checkpoint=kept_checkpoints(config)[6])
    )
    assert [(label, step) for label, _, step in models] == [("step 2", 2), ("step 6 (best)", 6)]
    for _, path, step in models:  # local copies, each of its own checkpoint
        assert "://" not in path and read_state(Path(path)).step == step
        assert json.loads((Path(path) / "model" / "config.json").read_text()) == {"step": step}


@pytest.mark.parametrize("command", ["train", "check"])
def test_train_and_check_commands_check_the_section_before_training(command, monkeypatch, capsys):
    import distalign.train.trainer
    from distalign.cli import main

    monkeypatch.setattr(distalign.train.trainer, "run_training", lambda *a, **k: pytest.fail("training started"))
    assert main([command, QUICKSTART, *WORLD, "eval.transfer.tasks=[xnli]"]) == 2
    assert "eval.transfer.tasks[0]: 'xnli' is not one of ['udpos', 'pawsx']" in capsys.readouterr().err


def test_run_experiment_checks_the_section_before_training_a_config_loaded_unchecked(monkeypatch):
    """A config loaded before ``distalign.transfer.training`` registered its check (here: the registry emptied) is
    checked by ``run_experiment`` itself, before training starts."""
    import distalign.train.trainer
    from distalign.config import schema
    from distalign.studies.experiment import run_experiment

    monkeypatch.setattr(schema, "SECTION_CHECKS", {})
    config = load_config(QUICKSTART, [*WORLD, "eval.transfer.tasks=[xnli]"])  # not checked: nothing registered
    monkeypatch.setattr(distalign.train.trainer, "run_training", lambda *a, **k: pytest.fail("training started"))
    with pytest.raises(ConfigError, match=r"eval\.transfer\.tasks\[0\]: 'xnli' is not one of \['udpos', 'pawsx'\]"):
        run_experiment(config)
