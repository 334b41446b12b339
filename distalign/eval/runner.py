"""``distalign eval``: BLI of a model or checkpoint on test dictionaries, printed and optionally in MLflow.

    distalign eval --model runs/quickstart/checkpoint_<time> \
        --dictionary de-en:../shared/data/eval/bli/gbli/de-en/yacle.test.freq.2k.de-en.tsv
"""

from __future__ import annotations

from pathlib import Path

from distalign.data.readers import InputError, read_dictionary
from distalign.eval.bli_task import build_test_set, evaluate_bli
from distalign.models.alignment_model import AlignmentModel
from distalign.models.loading import load_masked_lm, load_tokenizer
from distalign.train.checkpoint import MODEL_DIR

MAX_WORD_TOKENS = 16


def resolve_model(name: str) -> str:
    """A checkpoint directory means its ``model/``; anything else is a model directory or hub name."""
    path = Path(name).expanduser()
    if (path / MODEL_DIR / "config.json").is_file():
        return str(path / MODEL_DIR)
    return str(path) if path.exists() else name


def parse_dictionary_spec(spec: str) -> tuple[str, str, Path]:
    pair, sep, path = spec.partition(":")
    langs = pair.split("-")
    if not sep or len(langs) != 2 or not all(langs):
        raise InputError(f"--dictionary {spec!r}: expected L1-L2:PATH, e.g. de-en:test.tsv")
    if not Path(path).is_file():
        raise InputError(f"--dictionary {spec!r}: file not found: {path}")
    return langs[0], langs[1], Path(path)


def run_eval_cli(args) -> int:
    specs = [parse_dictionary_spec(s) for s in args.dictionary]  # all input errors before the model loads
    test_sets = []
    for lang1, lang2, path in specs:
        table, report = read_dictionary(path, lang1, lang2)
        if report.malformed:
            print(f"[distalign] WARNING {report.summary()}")
        test_sets.append(build_test_set(lang1, lang2, table["word1"].to_pylist(), table["word2"].to_pylist(),
                                        args.max_pairs))
    model_name = resolve_model(args.model)
    model = AlignmentModel(load_masked_lm(model_name), {}, {}, args.layer)
    metrics = evaluate_bli(model, load_tokenizer(model_name), test_sets, MAX_WORD_TOKENS)
    for key, value in metrics.items():
        print(f"{key}\t{value:.4f}")
    if args.tracking_uri:
        from distalign.tracking import tracked_run

        with tracked_run(args.tracking_uri, args.experiment, f"eval-{Path(model_name).name}", model_name,
                         {"model": model_name, "layer": args.layer, "max_pairs": args.max_pairs},
                         {"model": model_name, "dictionaries": args.dictionary}) as run_id:
            from distalign.tracking import MetricLogger

            MetricLogger(args.tracking_uri, run_id).log(metrics, step=0)
        print(f"[distalign] logged to MLflow run {run_id} ({args.tracking_uri})")
    return 0
