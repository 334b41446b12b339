"""``distalign check`` and the checks ``train`` and ``tune`` share (``distalign.train.preflight``): every problem of
a config reported in one run, each naming its key, before Ray; a good config's report of what was found."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import QUICKSTART, free_port

# a small quickstart world: its generation is the check's main work
SMALL = ["data.synthetic.num_concepts=60", "data.synthetic.sentences_per_language=200"]


class RayStarted(BaseException):
    """Raised by the trap in ``ray.init`` (BaseException: no ``except Exception`` hides it)."""


@pytest.fixture
def no_ray(monkeypatch):
    """``ray.init`` a trap: the checks must all come before Ray."""
    import ray

    def trap(*args, **kwargs):
        raise RayStarted("ray.init was called")

    monkeypatch.setattr(ray, "init", trap)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)


def run(argv: list[str], capsys) -> tuple[int, str, str, float]:
    """Exit status, stdout, stderr and seconds of ``distalign <argv>`` run by ``main`` in this process."""
    from distalign.cli import main

    capsys.readouterr()
    start = time.monotonic()
    status = main(argv)
    seconds = time.monotonic() - start
    out, err = capsys.readouterr()
    return status, out, err, seconds


@pytest.fixture
def four_wrong_inputs(tmp_path) -> Path:
    """A files config with four wrong inputs: storage under a file, a missing constraint file, a corpus glob matching
    nothing, a model directory without tokenizer files."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps({"model_type": "xlm-roberta"}))
    (tmp_path / "a-file").write_text("not a folder\n")
    config = tmp_path / "wrong.yaml"
    config.write_text(f"""
model: {{name_or_path: {tmp_path / "model"}}}
data:
  source: files
  constraints: [{tmp_path / "missing.parquet"}]
  corpora: [{{path: "{tmp_path / "corpus"}/*.txt", lang: en}}]
objectives: {{mlm: {{weight: 1.0}}, lexical: {{weight: 1.0}}}}
storage: {{path: {tmp_path / "a-file" / "runs"}}}
tracking: {{uri: sqlite:///{tmp_path / "mlflow.db"}}}
""")
    return config


EXPECTED = (
    "model.name_or_path: {root}/model has no tokenizer files",
    "data.constraints[0]: file not found: {root}/missing.parquet",
    "data.corpora[0].path: no file matches '{root}/corpus/*.txt'",
    "storage.path: {root}/a-file/runs is not writable",
)


def test_check_reports_every_wrong_input_in_one_run(four_wrong_inputs, capsys, no_ray):
    status, out, err, seconds = run(["check", str(four_wrong_inputs)], capsys)
    print(f"distalign check, four wrong inputs: {seconds:.1f} s")
    assert status == 2
    assert "4 problems:" in err
    for part in EXPECTED:
        assert part.format(root=four_wrong_inputs.parent) in err
    assert "Traceback" not in err and not out


def test_train_refuses_the_same_config_with_the_same_messages_before_ray(four_wrong_inputs, capsys, no_ray):
    _, _, checked, _ = run(["check", str(four_wrong_inputs)], capsys)
    status, _, err, _ = run(["train", str(four_wrong_inputs)], capsys)  # the trap fails it if it reaches Ray
    assert status == 2
    assert err == checked


def test_the_quickstart_passes_with_counts(tmp_path, capsys, no_ray):
    status, out, err, seconds = run(
        [
            "check",
            str(QUICKSTART),
            *SMALL,
            f"storage.path={tmp_path / 'runs'}",
            f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}",
        ],
        capsys,
    )
    print(f"distalign check, quickstart (small world): {seconds:.1f} s")
    assert status == 0, err
    assert "every check passed" in out
    assert f"storage: {tmp_path / 'runs'} writable" in out
    assert "model: tiny, built when training starts" in out
    assert "at least train.constraint_batch_size x train.num_workers = 64 needed): xa-xa " in out
    for lang in ("xa", "xb", "xc"):
        assert f"corpus {lang}: 1 text files" in out
    assert "evaluation (in-loop BLI): xa-xb " in out
    assert "resources: 2 workers need 1.75 CPUs" in out
    assert not (tmp_path / "runs" / "cache" / "tiny-model").exists()  # a check builds no model


def test_the_minimum_pairs_and_the_services_are_reported_together(tmp_path, capsys, no_ray):
    """Problems found after the inputs are read (too few pairs for the batch) come with those of the services
    (a tracking server that does not answer) and the cluster's size."""
    port = free_port()  # nothing listens there
    status, _, err, _ = run(
        [
            "check",
            str(QUICKSTART),
            *SMALL,
            f"storage.path={tmp_path / 'runs'}",
            "train.constraint_batch_size=500",
            "train.num_workers=64",
            f"tracking.uri=http://127.0.0.1:{port}",
        ],
        capsys,
    )
    assert status == 2
    assert "3 problems:" in err
    assert f"tracking.uri http://127.0.0.1:{port}: the MLflow tracking server does not answer" in err
    assert (
        "data.constraints: only " in err
        and "(at least train.constraint_batch_size=500 x train.num_workers=64 = 32000)" in err
    )
    assert "train.num_workers: 64 workers need 48.25 CPUs" in err


def test_a_study_checks_trials_with_the_same_inputs_once():
    from distalign.config import load_config
    from distalign.studies.shared_inputs import inputs_key

    base = load_config(QUICKSTART, SMALL)
    other_lr = load_config(QUICKSTART, [*SMALL, "train.lr=1e-4", "run.name=another"])
    other_seed = load_config(QUICKSTART, [*SMALL, "train.seed=1"])
    assert inputs_key(base) == inputs_key(other_lr)
    assert inputs_key(base) != inputs_key(other_seed)


def test_a_hub_model_is_looked_up_even_when_the_inputs_cannot_be_read(tmp_path, capsys, no_ray, monkeypatch):
    """Unwritable storage keeps the inputs unread (the world's cache lives there); the Hub name is still checked."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # no network here: the offline answer, at once
    (tmp_path / "a-file").write_text("")
    status, _, err, _ = run(
        [
            "check",
            str(QUICKSTART),
            "model.name_or_path=nobody/no-such-model",
            f"storage.path={tmp_path / 'a-file'}",
            f"tracking.uri=sqlite:///{tmp_path / 'm.db'}",
        ],
        capsys,
    )
    assert status == 2
    assert "2 problems:" in err
    assert "model.name_or_path: nobody/no-such-model is not in the Hugging Face cache and HF_HUB_OFFLINE is set" in err
    assert f"storage.path: {tmp_path / 'a-file'} is not writable" in err


def test_a_ray_address_that_does_not_answer_is_reported_in_seconds(tmp_path, capsys, no_ray, monkeypatch):
    port = free_port()  # nothing listens there: Ray itself would retry for minutes
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    status, _, err, seconds = run(
        [
            "check",
            str(QUICKSTART),
            *SMALL,
            f"storage.path={tmp_path / 'runs'}",
            f"tracking.uri=sqlite:///{tmp_path / 'm.db'}",
        ],
        capsys,
    )
    assert status == 2
    assert "train.num_workers: the Ray cluster in RAY_ADDRESS cannot be joined" in err
    assert f"RAY_ADDRESS=127.0.0.1:{port} does not answer" in err


def test_a_study_checks_each_distinct_trial_once(tmp_path, caplog, no_ray):
    """tuning/quickstart.yaml's grid: 2 learning rates x 2 constraint-set sizes, 2 distinct inputs."""
    from distalign.studies.study import load_study
    from distalign.studies.tune_run import check_trials

    _, trials = load_study(
        QUICKSTART.parents[2] / "tuning" / "quickstart.yaml",
        [*SMALL, f"storage.path={tmp_path / 'runs'}", f"tracking.uri=sqlite:///{tmp_path / 'm.db'}"],
    )
    with caplog.at_level("INFO", logger="distalign"):
        check_trials(trials)
    assert "inputs of the 4 trials checked and prepared (2 distinct" in caplog.text


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_a_folder_where_no_file_can_be_made_is_not_writable_even_to_root():
    """Root passes os.access on /proc, where no file can be made: the storage check must not (it then failed later,
    as a traceback from the preparation's mkdir)."""
    from distalign.errors import ConfigError, require_writable

    with pytest.raises(ConfigError, match=r"storage.path: /proc/nope is not writable \(/proc is not writable\)"):
        require_writable(Path("/proc/nope"), "storage.path")
    require_writable(Path("/tmp/distalign-probe/below"), "storage.path")  # a writable ancestor passes, nothing made
    assert not Path("/tmp/distalign-probe").exists()
