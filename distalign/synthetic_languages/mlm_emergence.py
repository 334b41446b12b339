"""When does MLM alone align a language with its transliteration? Learning curves of ALIGN-MLM's alignment score.

Each setting is the bench's MLM cell on ``translit`` (``distalign.synthetic_languages.benchmark``: the same corpus,
dictionary, tokenizer, tiny model and MLM batches) with one factor changed: steps, model size, corpus size,
vocabulary, a share of words the two languages share (``BenchSpec.shared_words``), or the transformation
(``translit_inv``, the paper's Trans + Inv, where MLM alone should stay near chance). ``--override KEY=VALUE``
changes the training config of every setting (``train.lr_schedule=constant`` keeps the rate at its peak after
warm-up; the bench's schedule decays it linearly to 0 at ``--steps``). The cell is trained in this process, without
Ray (the training recipe in a gloo group of one, fed by ``local_streams``), one worker taking the batch the bench's
two DDP workers share, and the alignment score is taken from the input embeddings every ``--every`` steps, so one
run gives a curve. Rows go to ``curves.csv`` as they come (``epochs``: sentences seen over the two languages'
corpus); ``curves.png`` plots them and ``crossings.md`` says when each curve first reached 10, 25, 50 and 80 %.
``--parallel N`` trains N settings at a time, one process (and one thread) each, appending to one ``curves.csv``.

    python -m distalign.synthetic_languages.mlm_emergence --settings default,wide --steps 3000 --every 250
    python -m distalign.synthetic_languages.mlm_emergence --settings small_corpus,translit_inv --steps 12000 \
        --every 500 --override train.lr_schedule=constant --parallel 2
    python -m distalign.synthetic_languages.mlm_emergence --device cuda --settings small_corpus,default,wide \
        --parallel 3 --steps 30000 --every 1500 --override train.lr_schedule=constant --max-seconds 3600

``--device`` (default ``auto``: CUDA where there is a GPU) is where the recipe trains: the model is tiny, but on a GPU
node a step is still several times faster than on one of its CPU threads, and a user there expects the GPU taken;
on a machine without one nothing changes. ``--max-seconds`` ends each curve at the first alignment row that long
after the command started (its imports and every setting's set-up count: a caller's timeout can rely on it; the
curve so far is kept, as at the last step).
"""

from __future__ import annotations

import argparse
import csv
import fcntl
import logging
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import psutil
import torch

from distalign.synthetic_languages.benchmark import BenchSpec, prepare_bench, training_config, vocabulary_counterparts

log = logging.getLogger("distalign")

BENCH_WORKERS = 2  # the bench's DDP workers (jobs/configs/bench_synthetic.yaml): one worker here takes both batches


@dataclass(frozen=True)
class Setting:
    """One factor away from the bench's MLM cell: its BenchSpec fields, training-config overrides, transformation."""

    about: str
    spec: dict = field(default_factory=dict)
    overrides: tuple[str, ...] = ()
    transformation: str = "translit"


SETTINGS = {
    "default": Setting("the bench: 20K sentences, 2 layers x 64, vocabulary 4,000"),
    "wide": Setting(
        "4 layers x 128 (4 heads, FFN 512)",
        overrides=(
            "model.tiny.hidden_size=128",
            "model.tiny.num_layers=4",
            "model.tiny.num_heads=4",
            "model.tiny.intermediate_size=512",
        ),
    ),
    "narrow": Setting(
        "1 layer x 32 (FFN 64)",
        overrides=("model.tiny.hidden_size=32", "model.tiny.num_layers=1", "model.tiny.intermediate_size=64"),
    ),
    "small_corpus": Setting("5K sentences", {"max_sentences": 5_000}),
    "large_corpus": Setting("80K sentences (all of Tatoeba's English)", {"max_sentences": 80_000}),
    "small_vocab": Setting("vocabulary 1,000", overrides=("model.tiny.vocab_size=1000",)),
    "packed": Setting("sentences packed to 64 tokens a sequence", overrides=("data.pack_sequences=true",)),
    "shared10": Setting("10 % of the word types untransliterated", {"shared_words": 0.1}),
    "shared30": Setting("30 % of the word types untransliterated", {"shared_words": 0.3}),
    "world": Setting(
        "the synthetic world's corpus (5K sentences, 2,000 concepts) and tasks: the bench's --world",
        {"world": 100, "max_sentences": 5_000},
    ),
    "translit_inv": Setting("Trans + Inv: the derived sentences inverted (paper: 0.3)", transformation="translit_inv"),
    "small_corpus_inv": Setting(
        "Trans + Inv on 5K sentences (the paper-shape preset's)",
        {"max_sentences": 5_000},
        transformation="translit_inv",
    ),
}


def bench_spec(
    setting: Setting, out_dir: Path, steps: int, seed: int, overrides: tuple[str, ...] = (), corpus: str = ""
) -> BenchSpec:
    spec = BenchSpec(
        transformations=(setting.transformation,),
        objectives=("mlm",),
        seed=seed,
        corpus=corpus,
        output_dir=str(out_dir),
        overrides=[f"train.max_steps={steps}", f"train.checkpoint_every={steps}", *setting.overrides, *overrides],
    )
    return replace(spec, **setting.spec)


def resolve_device(name: str) -> torch.device:
    """``cpu``, ``cuda`` (an error without a GPU) or ``auto`` (CUDA where available)."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device here (torch.cuda.is_available() is False)")
    return torch.device(name)


def run_curve(
    name: str,
    out_dir: Path,
    steps: int,
    every: int,
    seed: int = 0,
    overrides: tuple[str, ...] = (),
    device: str = "cpu",
    deadline: float = 0,
    corpus: str = "",
) -> list[dict]:
    """The setting's MLM cell trained for ``steps`` on ``device`` (``overrides``: training-config changes on top of
    the setting's), its alignment every ``every`` steps (and at step 0), each row appended to ``out_dir/curves.csv``
    as it comes (a run stopped early keeps its curve so far); with a ``deadline`` (``time.time()`` seconds), the
    curve ends at the first alignment row after it. ``corpus``: the base corpus (default: the bench's)."""
    import torch.distributed as dist

    from distalign.eval.alignment import vocabulary_alignment
    from distalign.preparation.inputs import prepare_data
    from distalign.preparation.ray_streams import local_streams
    from distalign.train.recipe import TrainingRecipe
    from distalign.train.trainer import plan_training

    setting = SETTINGS[name]
    bench = prepare_bench(bench_spec(setting, out_dir / name, steps, seed, overrides, corpus))
    transformation = setting.transformation
    config = training_config(bench.spec, transformation, "mlm", bench.data[transformation], bench.out_dir)
    config.train.corpus_batch_size *= config.train.num_workers  # the global batch of the bench's workers
    config.train.num_workers = 1
    corpus_sentences = 2 * bench.params["sentences"]  # the base corpus and its derived twin
    prepared = prepare_data(config)
    own_group = not dist.is_initialized()
    if own_group:  # DDP's group of one, in memory
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    recipe = TrainingRecipe(plan_training(config, prepared, mlflow_run_id=""), device=resolve_device(device))
    recipe.setup()
    vocab = recipe.tokenizer.get_vocab()
    src, tgt, candidates, _ = vocabulary_counterparts(vocab, bench.translit, recipe.tokenizer.all_special_tokens)
    masked_lm = recipe.engine.module.masked_lm
    streams = local_streams(prepared, config)
    rows: list[dict] = []
    losses: list[float] = []
    started, cpu = time.time(), time.process_time()

    def record(step: int) -> None:
        with torch.no_grad():
            score = vocabulary_alignment(masked_lm.get_input_embeddings().weight, src, tgt, candidates)
        loss = sum(losses) / len(losses) if losses else float("nan")
        rows.append(
            {
                "setting": name,
                "step": step,
                "alignment": score,
                "mlm_loss": loss,
                "tokens": len(src),
                "vocab": len(vocab),
                "sentences": bench.params["sentences"],
                "epochs": step * config.train.corpus_batch_size / corpus_sentences,
                "lr": recipe.engine.lr,
                "seconds": time.time() - started,
                "cpu_seconds": time.process_time() - cpu,
            }
        )
        losses.clear()
        append_row(out_dir / "curves.csv", rows[-1])
        log.info(
            "%s step %d: alignment %.2f (%d tokens), MLM loss %.3f, %.0f s",
            name,
            step,
            score,
            len(src),
            loss,
            rows[-1]["seconds"],
        )

    try:
        record(0)
        for step in range(1, steps + 1):
            losses.append(float(recipe.step([recipe.next_batches(streams)])["Train/loss"]))  # trimmed as a run's
            out_of_time = deadline and time.time() > deadline
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
    """``row`` appended to ``table`` (a header first when it is empty), under a lock: settings run side by side
    (``--parallel``) append to the same file."""
    with table.open("a", encoding="utf-8", newline="") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        writer = csv.DictWriter(f, fieldnames=list(row))
        if f.tell() == 0:
            writer.writeheader()
        writer.writerow(row)
        f.flush()
        fcntl.flock(f, fcntl.LOCK_UN)


def split_curves(rows: list[dict]) -> list[list[dict]]:
    """The runs in ``rows``, in the order they started: a run starts at step 0, and runs side by side
    (``--parallel``) interleave their rows, told apart by setting."""
    curves: list[list[dict]] = []
    latest: dict[str, list[dict]] = {}
    for row in rows:
        if row["step"] == 0 or row["setting"] not in latest:
            latest[row["setting"]] = []
            curves.append(latest[row["setting"]])
        latest[row["setting"]].append(row)
    return curves


def plot(rows: list[dict], path: Path) -> None:
    """Alignment over steps and, where the rows have it, over epochs of the two languages' corpus."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = split_curves(rows)
    axes_x = [("step", "training step (global batch of 64 sentences)")]
    if all("epochs" in row for row in rows):  # curves.csv of runs before the column had none
        axes_x.append(("epochs", "epochs of the two languages' corpus"))
    fig, axes = plt.subplots(1, len(axes_x), figsize=(7 * len(axes_x), 5), squeeze=False)
    for ax, (x, xlabel) in zip(axes[0], axes_x):
        for curve in curves:
            name = curve[0]["setting"]
            label = f"{name}: {SETTINGS[name].about}" if name in SETTINGS else name
            ax.plot(
                [float(r[x]) for r in curve],
                [float(r["alignment"]) for r in curve],
                marker="o",
                markersize=2,
                label=f"{label}, {int(curve[-1]['step'])} steps",
            )
        ax.set(xlabel=xlabel, ylabel="alignment, % (ALIGN-MLM's score; paper, MLM on Trans: 90.0)")
        ax.grid(alpha=0.3)
    axes[0][0].set_title("MLM alone: alignment over training")
    axes[0][0].legend(fontsize=7, loc="upper left")  # the curves start low: that corner stays free
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def crossings(rows: list[dict], thresholds: tuple[float, ...] = (10, 25, 50, 80)) -> str:
    """A markdown table: per curve, the first step (and epoch) its alignment reached each threshold, and where
    it ended."""
    head = " | ".join(f"≥ {t:g} %" for t in thresholds)
    lines = [
        f"| setting | {head} | last step | alignment there | MLM loss there |",
        "|---|" + "---|" * (len(thresholds) + 3),
    ]
    for curve in split_curves(rows):
        cells = []
        for threshold in thresholds:
            first = next((r for r in curve if float(r["alignment"]) >= threshold), None)
            epochs = f" ({float(first['epochs']):.0f} epochs)" if first and "epochs" in first else ""
            cells.append("–" if first is None else f"{int(first['step']):,}{epochs}")
        last = curve[-1]
        lines.append(
            f"| {last['setting']} | {' | '.join(cells)} | {int(last['step']):,} "
            f"| {float(last['alignment']):.1f} | {float(last['mlm_loss']):.2f} |"
        )
    return "\n".join(lines) + "\n"


def read_rows(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [{k: (v if k == "setting" else float(v)) for k, v in row.items()} for row in csv.DictReader(f)]


def curve_in_process(name: str, setting: Setting, *curve) -> list[dict]:
    """``run_curve`` in a pool's process, which learns the setting from the caller (one added at run time, as a
    test's, is not in a fresh interpreter's SETTINGS)."""
    SETTINGS[name] = setting
    return run_curve(name, *curve)


def one_thread() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(1)  # a tiny model: a second thread costs more CPU than it saves (2 shared cores)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--settings", default="default", help=f"comma list of {', '.join(SETTINGS)}")
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--every", type=int, default=250, help="alignment every this many steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="training-config override for every setting, e.g. train.lr_schedule=constant (repeatable)",
    )
    parser.add_argument("--parallel", type=int, default=1, help="settings trained at a time, one process each")
    parser.add_argument("--output-dir", default="mlm_emergence", help="curves.csv (appended), curves.png, crossings.md")
    parser.add_argument(
        "--plot",
        nargs="+",
        metavar="CSV",
        help="only plot these curves.csv files (runs made side by side) into --output-dir/curves.png, crossings.md",
    )
    parser.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="where the recipe trains (default auto: CUDA where there is a GPU)",
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=0,
        help="end each curve at the first alignment row this long after the command started (0: never)",
    )
    parser.add_argument(
        "--corpus",
        default="",
        help="base corpus, one sentence a line (default: the English side "
        "of Tatoeba in the data home: distalign data fetch tatoeba)",
    )
    args = parser.parse_args(argv)
    one_thread()
    names = args.settings.split(",")
    unknown = set(names) - set(SETTINGS)
    if unknown:
        parser.error(f"unknown settings {sorted(unknown)}; choose from {', '.join(SETTINGS)}")
    out = Path(args.output_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.plot:
        report([row for path in args.plot for row in read_rows(Path(path))], out)
        return 0
    bad = [o for o in args.override if "=" not in o]
    if bad or args.parallel < 1:
        parser.error(f"--override takes KEY=VALUE (got {bad}); --parallel at least 1")
    device = str(resolve_device(args.device))  # refused here, before any process starts, where there is no GPU
    # from the process's start, not each curve's: set-up and the report's plot stay within what the caller allows
    deadline = psutil.Process().create_time() + args.max_seconds if args.max_seconds else 0.0
    curve = (out, args.steps, args.every, args.seed, tuple(args.override), device, deadline, args.corpus)
    if args.parallel == 1:
        for name in names:
            run_curve(name, *curve)
    else:  # fresh interpreters: each its own gloo group of one and one torch thread
        with ProcessPoolExecutor(args.parallel, multiprocessing.get_context("spawn"), initializer=one_thread) as pool:
            for done in [pool.submit(curve_in_process, name, SETTINGS[name], *curve) for name in names]:
                done.result()
    report(read_rows(out / "curves.csv"), out)
    return 0


def report(rows: list[dict], out: Path) -> None:
    """curves.png and crossings.md (printed too) in ``out``."""
    plot(rows, out / "curves.png")
    table = crossings(rows)
    (out / "crossings.md").write_text(table, encoding="utf-8")
    print(table, flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
