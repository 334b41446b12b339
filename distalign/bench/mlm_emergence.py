"""When does MLM alone align a language with its transliteration? Learning curves of ALIGN-MLM's alignment score.

Each setting is the bench's MLM cell on ``translit`` (``distalign.bench.synthetic``: the same corpus, dictionary,
tokenizer, tiny model and MLM batches) with one factor changed: steps, model size, corpus size, vocabulary, or a
share of words the two languages share (``BenchSpec.shared_words``). The cell is trained in this process, without
Ray (the training recipe in a gloo group of one, fed by ``local_streams``), one worker taking the batch the bench's
two DDP workers share, and the alignment score is taken from the input embeddings every ``--every`` steps, so one
run gives a curve. Rows go to ``curves.csv`` as they come; ``curves.png`` plots them.

    python -m distalign.bench.mlm_emergence --settings default,wide --steps 3000 --every 250
    python -m distalign.bench.mlm_emergence --device cuda --settings small_corpus,default,wide --parallel 3 \
        --steps 30000 --every 1500 --max-seconds 3600

``--device`` (default ``auto``: CUDA where there is a GPU) is where the recipe trains: the model is tiny, but on a GPU
node a step is still several times faster than on one of its CPU threads, and a user there expects the GPU taken;
on a machine without one nothing changes. ``--parallel N`` trains N settings at a time, one process each (their rows
in ``<output-dir>/<setting>/curves.csv``, one plot of all); ``--max-seconds`` ends each curve at the first alignment
row after that time (the curve so far is kept, as at the last step).
"""

from __future__ import annotations

import argparse
import csv
import logging
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from distalign.bench.synthetic import BenchSpec, prepare_bench, training_config, vocabulary_counterparts

log = logging.getLogger("distalign")

BENCH_WORKERS = 2  # the bench's DDP workers (jobs/configs/bench_synthetic.yaml): one worker here takes both batches


@dataclass(frozen=True)
class Setting:
    """One factor away from the bench's MLM cell: its BenchSpec fields and training-config overrides."""

    about: str
    spec: dict = field(default_factory=dict)
    overrides: tuple[str, ...] = ()


SETTINGS = {
    "default": Setting("the bench: 20K sentences, 2 layers x 64, vocabulary 4,000"),
    "wide": Setting("4 layers x 128 (4 heads, FFN 512)", overrides=(
        "model.tiny.hidden_size=128", "model.tiny.num_layers=4", "model.tiny.num_heads=4",
        "model.tiny.intermediate_size=512")),
    "narrow": Setting("1 layer x 32 (FFN 64)", overrides=(
        "model.tiny.hidden_size=32", "model.tiny.num_layers=1", "model.tiny.intermediate_size=64")),
    "small_corpus": Setting("5K sentences", {"max_sentences": 5_000}),
    "large_corpus": Setting("80K sentences (all of Tatoeba's English)", {"max_sentences": 80_000}),
    "small_vocab": Setting("vocabulary 1,000", overrides=("model.tiny.vocab_size=1000",)),
    "packed": Setting("sentences packed to 64 tokens a sequence", overrides=("data.pack_sequences=true",)),
    "shared10": Setting("10 % of the word types untransliterated", {"shared_words": 0.1}),
    "shared30": Setting("30 % of the word types untransliterated", {"shared_words": 0.3}),
}


def bench_spec(setting: Setting, out_dir: Path, steps: int, seed: int, corpus: str = "") -> BenchSpec:
    spec = BenchSpec(transformations=("translit",), objectives=("mlm",), seed=seed, output_dir=str(out_dir),
                     corpus=corpus,
                     overrides=[f"train.max_steps={steps}", f"train.checkpoint_every={steps}", *setting.overrides])
    return replace(spec, **setting.spec)


def resolve_device(name: str) -> torch.device:
    """``cpu``, ``cuda`` (an error without a GPU) or ``auto`` (CUDA where available)."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device here (torch.cuda.is_available() is False)")
    return torch.device(name)


def run_curve(name: str, out_dir: Path, steps: int, every: int, seed: int = 0, device: torch.device | None = None,
              max_seconds: float = 0, corpus: str = "") -> list[dict]:
    """The setting's MLM cell trained for ``steps`` on ``device`` (default CPU), its alignment every ``every`` steps
    (and at step 0), each row appended to ``out_dir/curves.csv`` as it comes (a run stopped early keeps its curve so
    far); with ``max_seconds``, the curve ends at the first alignment row after that long."""
    import torch.distributed as dist

    from distalign.eval.alignment import vocabulary_alignment
    from distalign.preparation.inputs import prepare_data
    from distalign.preparation.streams import local_streams
    from distalign.train.recipe import TrainingRecipe
    from distalign.train.trainer import plan_training

    bench = prepare_bench(bench_spec(SETTINGS[name], out_dir / name, steps, seed, corpus))
    config = training_config(bench.spec, "translit", "mlm", bench.data["translit"], bench.out_dir)
    config.train.corpus_batch_size *= config.train.num_workers  # the global batch of the bench's workers
    config.train.num_workers = 1
    prepared = prepare_data(config)
    own_group = not dist.is_initialized()
    if own_group:  # DDP's group of one, in memory
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    recipe = TrainingRecipe(plan_training(config, prepared, mlflow_run_id=""), device=device)
    recipe.setup()
    vocab = recipe.tokenizer.get_vocab()
    src, tgt, candidates, _ = vocabulary_counterparts(vocab, bench.translit, recipe.tokenizer.all_special_tokens)
    masked_lm = recipe.engine.module.masked_lm
    streams = local_streams(prepared, config)
    rows, losses, started, cpu = [], [], time.time(), time.process_time()

    def record(step: int) -> None:
        with torch.no_grad():
            score = vocabulary_alignment(masked_lm.get_input_embeddings().weight, src, tgt, candidates)
        loss = sum(losses) / len(losses) if losses else float("nan")
        rows.append({"setting": name, "step": step, "alignment": score, "mlm_loss": loss, "tokens": len(src),
                     "vocab": len(vocab), "sentences": bench.params["sentences"], "seconds": time.time() - started,
                     "cpu_seconds": time.process_time() - cpu})
        losses.clear()
        append_row(out_dir / "curves.csv", rows[-1])
        log.info("%s step %d: alignment %.2f (%d tokens), MLM loss %.3f, %.0f s", name, step, score, len(src), loss,
                 rows[-1]["seconds"])

    try:
        record(0)
        for step in range(1, steps + 1):
            losses.append(float(recipe.step([recipe.next_batches(streams)])["train/loss"]))  # trimmed as a run's
            out_of_time = max_seconds and time.time() - started > max_seconds
            if step % every == 0 or step == steps or out_of_time:
                record(step)
            if out_of_time:
                log.info("%s: stopped at step %d after %.0f s (--max-seconds)", name, step, time.time() - started)
                break
    finally:
        if own_group:  # the next curve (or the caller's test) starts its own
            dist.destroy_process_group()
    return rows


def append_row(table: Path, row: dict) -> None:
    new = not table.exists()
    with table.open("a", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(row))
        if new:
            writer.writeheader()
        writer.writerow(row)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves: list[list[dict]] = []
    for row in rows:  # a run starts at step 0
        if row["step"] == 0 or not curves:
            curves.append([])
        curves[-1].append(row)
    fig, ax = plt.subplots(figsize=(8, 5))
    for curve in curves:
        name = curve[0]["setting"]
        label = f"{name}: {SETTINGS[name].about}" if name in SETTINGS else name
        ax.plot([r["step"] for r in curve], [float(r["alignment"]) for r in curve], marker="o", markersize=3,
                label=f"{label}, {int(curve[-1]['step'])} steps")
    ax.set_xlabel("training step (global batch of 64 sentences)")
    ax.set_ylabel("alignment, % (ALIGN-MLM's score; paper, MLM on Trans: 90.0)")
    ax.set_title("MLM alone on translit: alignment over training")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def read_rows(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [{k: (v if k == "setting" else float(v)) for k, v in row.items()} for row in csv.DictReader(f)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--settings", default="default", help=f"comma list of {', '.join(SETTINGS)}")
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--every", type=int, default=250, help="alignment every this many steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output-dir", default="mlm_emergence", help="curves.csv (appended) and curves.png")
    parser.add_argument("--plot", nargs="+", metavar="CSV", help="only plot these curves.csv files (runs made side "
                                                                  "by side) into --output-dir/curves.png")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="where the recipe trains (default auto: CUDA where there is a GPU)")
    parser.add_argument("--parallel", type=int, default=1, help="settings trained at a time, a process each")
    parser.add_argument("--max-seconds", type=float, default=0, help="end each curve at the first alignment row "
                                                                     "after this long (0: never)")
    parser.add_argument("--corpus", default="", help="base corpus, one sentence a line (default: the English side "
                                                     "of ../shared/data/eval/tatoeba)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(1)  # a tiny model: a second thread costs more CPU than it saves (2 shared cores)
    names = args.settings.split(",")
    unknown = set(names) - set(SETTINGS)
    if unknown:
        parser.error(f"unknown settings {sorted(unknown)}; choose from {', '.join(SETTINGS)}")
    out = Path(args.output_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.plot:
        plot([row for path in args.plot for row in read_rows(Path(path))], out / "curves.png")
        return 0
    if args.parallel > 1 and len(names) > 1:
        return run_side_by_side(names, out, args.parallel, argv if argv is not None else sys.argv[1:])
    device = resolve_device(args.device)
    if device.type == "cuda":  # TF32 matrix products, as a GPU run's recipe would use them
        torch.set_float32_matmul_precision("high")
    for name in names:
        run_curve(name, out, args.steps, args.every, args.seed, device, args.max_seconds, args.corpus)
    plot(read_rows(out / "curves.csv"), out / "curves.png")
    return 0


def run_side_by_side(names: list[str], out: Path, jobs: int, argv: list[str]) -> int:
    """Each setting in a process of its own (``setting_argv``), ``jobs`` at a time; then one plot of every curve.
    The worst exit code."""
    codes, running, waiting = [], [], list(names)
    while waiting or running:
        while waiting and len(running) < jobs:
            running.append(subprocess.Popen(setting_argv(argv, waiting.pop(0), out)))
        codes.append(running.pop(0).wait())
    tables = [out / name / "curves.csv" for name in names if (out / name / "curves.csv").exists()]
    if tables:
        plot([row for table in tables for row in read_rows(table)], out / "curves.png")
    return max(codes)


def setting_argv(argv: list[str], name: str, out: Path) -> list[str]:
    """This command for one setting: ``argv`` with ``--settings NAME --parallel 1 --output-dir out/NAME``."""
    replaced = {"--settings": name, "--parallel": "1", "--output-dir": str(out / name)}
    rest, skip = [], False
    for arg in argv:  # the options set here dropped, given as "--opt value" or "--opt=value"
        if skip:
            skip = False
            continue
        if arg.split("=", 1)[0] in replaced:
            skip = "=" not in arg
            continue
        rest.append(arg)
    return [sys.executable, "-m", "distalign.bench.mlm_emergence", *rest,
            *(item for pair in replaced.items() for item in pair)]


if __name__ == "__main__":
    raise SystemExit(main())
