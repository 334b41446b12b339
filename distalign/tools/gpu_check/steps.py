"""What the GPU check runs: one ``Step`` per command, each with its own timeout and the reader of its figures.

Every step runs in the repository root in a process session of its own, with its own ``DISTALIGN_HOME`` (its
MLflow store, runs and command logs) and a shared data cache. Arguments may name these places, filled in when the
step starts: ``{python}`` (this interpreter), ``{home}`` (the step's DISTALIGN_HOME), ``{out}`` (the step's output
folder), ``{work}`` (the check's work folder), ``{carry}`` (the folder carried to the GPU machine: the site archive,
the bench corpus), ``{limit_s}`` (the seconds the step may run), ``{stop_s}`` (when a step that stops itself by
the clock should, to end in time).

The five tiny configs share out the engines (each run alone would not fit the time budget; all run side by side):

    align_mlm_tiny                 DeepSpeed ZeRO-2, bf16
    babelbert_sense_adapters_tiny  DeepSpeed ZeRO-2, bf16 (frozen base weights, adapters trained)
    dict_mlm_tiny                  DeepSpeed ZeRO-3, bf16
    sense_aware_tiny               DDP, bf16
    static_align_tiny              DDP, fp32
"""

from __future__ import annotations

from dataclasses import dataclass, field

DISTALIGN = ("{python}", "-m", "distalign.cli")
# the tiny configs' engines (module docstring): config name -> training-config overrides
TINY_ENGINES = {
    "align_mlm_tiny": ("train.engine=deepspeed", "train.zero_stage=2", "train.precision=bf16"),
    "babelbert_sense_adapters_tiny": ("train.engine=deepspeed", "train.zero_stage=2", "train.precision=bf16"),
    "dict_mlm_tiny": ("train.engine=deepspeed", "train.zero_stage=3", "train.precision=bf16"),
    "sense_aware_tiny": ("train.engine=ddp", "train.precision=bf16"),
    "static_align_tiny": ("train.engine=ddp", "train.precision=fp32"),
}
EMERGENCE_SETTINGS = ("small_corpus", "default", "translit_inv")
ENGINES_TEST = "tests/tools/bench/test_perf_bench.py::test_the_gpu_row_s_engines_run_on_a_small_model"


@dataclass(frozen=True)
class Step:
    name: str
    about: str
    argv: tuple[str, ...]
    timeout_s: int
    figures: str = ""  # the reader of what it measured (distalign.tools.gpu_check.figures.READERS), "" for none
    needs: tuple[str, ...] = ()  # steps that must have passed first
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Sizes:
    """How much each step does: the GPU check's, or the CPU rehearsal's (2 cores: fewer steps, longer caps)."""

    use_gpu: bool
    train_steps: int
    tune_steps: int
    transfer_epochs: int
    emergence_steps: int
    emergence_every: int
    timeout_scale: float


GPU = Sizes(
    use_gpu=True,
    train_steps=100,
    tune_steps=40,
    transfer_epochs=2,
    emergence_steps=30_000,
    emergence_every=1500,
    timeout_scale=1.0,
)
CPU = Sizes(
    use_gpu=False,
    train_steps=20,
    tune_steps=10,
    transfer_epochs=1,
    emergence_steps=60,
    emergence_every=20,
    timeout_scale=6.0,
)


def check_steps(sizes: Sizes) -> list[Step]:
    """The steps in the order they start (longest first, so the side-by-side runs end together). On the GPU they
    all start at once and the check's deadline, not their caps, bounds the long ones."""
    gpu = "true" if sizes.use_gpu else "false"
    device = "cuda" if sizes.use_gpu else "cpu"
    scale = sizes.timeout_scale

    def cap(seconds: float) -> int:
        return int(seconds * scale)

    steps = [
        Step(
            "environment",
            "python, torch, the device, the base and carried packages (requirement conflicts)",
            ("{python}", "-m", "distalign.tools.gpu_check.machine_environment", "{out}/environment.json"),
            cap(60),
            figures="environment",
        )
    ]
    steps += [
        Step(
            f"train_{name}",
            f"distalign train jobs/configs/{name}.yaml, one worker, "
            f"{sizes.train_steps} steps, {engine_label(overrides)}",
            (
                *DISTALIGN,
                "train",
                f"jobs/configs/{name}.yaml",
                f"train.use_gpu={gpu}",
                "train.num_workers=1",
                f"train.max_steps={sizes.train_steps}",
                f"train.checkpoint_every={sizes.train_steps // 2}",
                f"eval.every={sizes.train_steps // 2}",
                "tracking.system_metrics_every_s=2",
                *overrides,
            ),
            cap(320),
            figures="mlflow",
        )
        for name, overrides in TINY_ENGINES.items()
    ]
    steps += [
        Step(
            "tune_quickstart",
            "distalign tune tuning/quickstart.yaml: 2 one-worker trials in turn",
            (
                *DISTALIGN,
                "tune",
                "tuning/quickstart.yaml",
                f"train.use_gpu={gpu}",
                "train.num_workers=1",
                "grid.data.max_constraints=[400]",
                f"train.max_steps={sizes.tune_steps}",
                f"train.checkpoint_every={sizes.tune_steps // 2}",
                f"eval.every={sizes.tune_steps // 2}",
            ),
            cap(320),
            figures="mlflow",
        ),
        Step(
            "transfer_inputs",
            "the synthetic world's transfer tasks (udpos, pawsx) and its tiny model, no Ray",
            ("{python}", "-m", "distalign.tools.gpu_check.transfer_inputs", "{work}/transfer"),
            cap(60),
        ),
        Step(
            "transfer",
            "distalign transfer on the synthetic tasks, the untrained tiny model, one worker"
            + (" on the GPU" if sizes.use_gpu else ""),
            (
                *DISTALIGN,
                "transfer",
                "{work}/transfer/model",
                *(("--use-gpu",) if sizes.use_gpu else ()),
                "--tasks",
                "udpos,pawsx",
                "--data-dir",
                "{work}/transfer/tasks",
                "--source",
                "xa",
                "--seeds",
                "1",
                "--lr",
                "1e-3",
                "--epochs",
                str(sizes.transfer_epochs),
                "--select-every",
                "0",
                "--output-dir",
                "{out}/transfer",
            ),
            cap(300),
            figures="transfer",
            needs=("transfer_inputs",),
        ),
        Step(
            "bench_perf_gpu",
            "distalign bench perf --rows gpu: XLM-R-base size, bf16, DDP / ZeRO-2 / HF Trainer",
            (*DISTALIGN, "bench", "perf", "--rows", "gpu", "--no-mlflow", "--output-dir", "{out}/bench_perf"),
            cap(320),
            figures="bench",
        ),
        Step(
            "pytest_gpu",
            "the tests marked gpu (tests/conftest.py skips them without CUDA)",
            (
                "{python}",
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-rfEs",
                "-m",
                "gpu",
                "--junitxml={out}/junit.xml",
                "tests/",
            ),
            cap(200),
            figures="pytest",
        ),
        Step(
            "pytest_gpu_row_engines",
            "the GPU row's engines on a tiny model (a test that runs on CPU too: NCCL and the MFU here)",
            (
                "{python}",
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-rfEs",
                "--junitxml={out}/junit.xml",
                ENGINES_TEST,
            ),
            cap(120),
            figures="pytest",
        ),
        Step(
            "mlm_emergence",
            f"MLM emergence curves on {device}, settings {', '.join(EMERGENCE_SETTINGS)} side by "
            "side, stopped by the clock",
            (
                "{python}",
                "-m",
                "distalign.synthetic_languages.mlm_emergence",
                "--device",
                device,
                "--settings",
                ",".join(EMERGENCE_SETTINGS),
                "--parallel",
                str(len(EMERGENCE_SETTINGS)),
                "--steps",
                str(sizes.emergence_steps),
                "--every",
                str(sizes.emergence_every),
                "--override",
                "train.lr_schedule=constant",  # the rate kept up: the curves' finding (issue 37)
                "--max-seconds",
                "{stop_s}",
                "--corpus",
                "{carry}/bench_corpus.txt",
                "--output-dir",
                "{out}/emergence",
            ),
            cap(320),
            figures="emergence",
        ),
    ]
    return steps


def engine_label(overrides: tuple[str, ...]) -> str:
    """ "DeepSpeed ZeRO-2, bf16" from a config's engine overrides."""
    values = dict(o.split("=", 1) for o in overrides)
    engine = "DDP" if values.get("train.engine", "ddp") == "ddp" else f"DeepSpeed ZeRO-{values.get('train.zero_stage')}"
    return f"{engine}, {values.get('train.precision', 'fp32')}"
