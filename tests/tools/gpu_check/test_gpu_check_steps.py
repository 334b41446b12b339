"""The GPU check's step list: what runs, on which engine, with which sizes; every command it names exists."""

import pytest
from conftest import REPO

from distalign.cli import build_parser
from distalign.config import load_config
from distalign.tools.gpu_check.check import fail_without_figures, selected
from distalign.tools.gpu_check.figures import READERS
from distalign.tools.gpu_check.run import Places, StepResult, step_argv
from distalign.tools.gpu_check.steps import CPU, GPU, TINY_ENGINES, check_steps, engine_label


def places(tmp_path):
    return Places(REPO, tmp_path / "work", tmp_path / "out", tmp_path / "carry", "python3")


def test_every_tiny_config_trains_on_the_gpu_and_every_engine_is_covered():
    steps = {s.name: s for s in check_steps(GPU)}
    tiny = sorted(p.stem for p in (REPO / "jobs" / "configs").glob("*_tiny.yaml"))
    assert sorted(TINY_ENGINES) == tiny
    labels = {engine_label(TINY_ENGINES[name]) for name in tiny}
    assert {"DeepSpeed ZeRO-2, bf16", "DeepSpeed ZeRO-3, bf16"} <= labels and any(
        label.startswith("DDP") for label in labels
    )
    for name in tiny:
        argv = steps[f"train_{name}"].argv
        assert "train.use_gpu=true" in argv and "train.num_workers=1" in argv and "train.max_steps=100" in argv


@pytest.mark.parametrize("sizes", [GPU, CPU], ids=["gpu", "cpu"])
def test_the_training_commands_parse_and_their_configs_load_with_the_overrides(sizes, tmp_path):
    """Each distalign command of the list parses; each train step's config loads with its overrides (a renamed
    key would fail the check on the GPU machine, where time is short)."""
    parser = build_parser()
    for step in check_steps(sizes):
        argv = step_argv(step, places(tmp_path), 300)
        if argv[1:3] != ["-m", "distalign.cli"]:
            continue
        args = parser.parse_args(argv[3:])
        if args.command == "train":
            config = load_config(args.config, args.overrides)
            assert config.train.use_gpu is sizes.use_gpu and config.train.num_workers == 1
            assert config.train.max_steps == sizes.train_steps


def test_gpu_mode_uses_the_gpu_everywhere_and_the_rehearsal_nowhere(tmp_path):
    for sizes, flag in ((GPU, "true"), (CPU, "false")):
        steps = {s.name: step_argv(s, places(tmp_path), 300) for s in check_steps(sizes)}
        assert f"train.use_gpu={flag}" in steps["tune_quickstart"]
        assert ("--use-gpu" in steps["transfer"]) is sizes.use_gpu
        emergence = steps["mlm_emergence"]
        assert emergence[emergence.index("--device") + 1] == ("cuda" if sizes.use_gpu else "cpu")


def test_steps_are_unique_their_needs_come_first_and_their_readers_exist():
    steps = check_steps(GPU)
    names = [s.name for s in steps]
    assert len(set(names)) == len(names)
    for i, step in enumerate(steps):
        assert all(names.index(n) < i for n in step.needs)
        assert step.figures in READERS or step.figures == ""
        assert step.timeout_s > 0


def test_placeholders_are_filled_and_the_stop_time_leaves_a_margin(tmp_path):
    step = next(s for s in check_steps(GPU) if s.name == "mlm_emergence")
    argv = step_argv(step, places(tmp_path), 200)
    assert not any("{" in arg for arg in argv)
    assert argv[argv.index("--max-seconds") + 1] == "170"
    assert argv[argv.index("--output-dir") + 1] == str(tmp_path / "work" / "outputs" / "mlm_emergence" / "emergence")


def test_only_brings_the_steps_a_step_needs():
    steps = check_steps(CPU)
    assert [s.name for s in selected(steps, "transfer")] == ["transfer_inputs", "transfer"]
    assert selected(steps, "") == steps
    with pytest.raises(SystemExit, match="unknown steps"):
        selected(steps, "nope")


def test_a_step_that_exits_0_without_its_figures_fails():
    silent = StepResult(
        name="mlm_emergence", about="", status="PASS", figures={"error": "FileNotFoundError: no curves.csv"}
    )
    fine = StepResult(name="bench_perf_gpu", about="", status="PASS", figures={"rows": []})
    for result in (silent, fine):
        fail_without_figures(result)
    assert (silent.status, silent.note) == ("FAIL", "exited 0 but left no figures") and fine.status == "PASS"
