"""Model selection inside the training loop: BLI on held-out dictionary pairs, one layer, MRR per
language pair, and the relative MRR gain over the vanilla model that ranks checkpoints.

The target vocabulary of a pair is the top of a frequency list (``eval.vocab_dir``; BabelBERT
validates against 100K words, lower-cased like the shared lists), else the set of distinct target
words of its dictionary.
"""

from __future__ import annotations

import numpy as np

from distalign.eval.mlm_loss import MLM_LOSS_METRIC
from distalign.eval.tasks import BLIRanking, BLITask, EncodingSettings, evaluate_locally


def build_test_set(lang1: str, lang2: str, src: list[str], tgt: list[str], max_pairs: int = 0,
                   seed: int = 0, ranking: BLIRanking = "grouped", vocab: list[str] | None = None) -> BLITask:
    """Queries from dictionary pairs (``ranking`` as in ``BLITask``) of at most ``max_pairs`` source
    words (seeded), ranked among ``vocab`` (words looked up in it lower-cased) or the pairs' targets."""
    pairs = list(zip(src, tgt))
    sources = list(dict.fromkeys(src))
    if 0 < max_pairs < len(sources):
        keep = {sources[i] for i in np.random.default_rng(seed).choice(len(sources), size=max_pairs, replace=False)}
        pairs = [p for p in pairs if p[0] in keep]
    task = BLITask.from_pairs(lang1, lang2, pairs, vocab, lowercase=vocab is not None, ranking=ranking)
    order = sorted(range(len(task.vocab)), key=task.vocab.__getitem__)  # sorted vocabulary: stable across runs
    new_index = {old: new for new, old in enumerate(order)}
    task.vocab = [task.vocab[i] for i in order]
    task.gold = [sorted(new_index[i] for i in gold) for gold in task.gold]
    return task


def evaluate_bli(model, tokenizer, test_sets: list[BLITask], max_tokens: int, layer: int = -1) -> dict[str, float]:
    """``eval/bli/<l1>-<l2>/mrr`` for each set and their mean ``eval/bli/avg/mrr``, at ``layer``."""
    rows = evaluate_locally(model, tokenizer, test_sets, [layer], EncodingSettings(max_word_tokens=max_tokens))
    metrics = {f"eval/bli/{r['pair']}/mrr": r["value"] for r in rows if r["metric"] == "mrr"}
    if metrics:
        metrics["eval/bli/avg/mrr"] = float(np.mean(list(metrics.values())))
    return metrics


SELECTION_METRIC = "eval/selection/rel_mrr_gain"


def selection_score(select_by: str) -> tuple[str, str]:
    """(metric, mode) that ranks a run's checkpoints for ``eval.select_by``."""
    return (MLM_LOSS_METRIC, "min") if select_by == "mlm_loss" else (SELECTION_METRIC, "max")


def pair_mrrs(metrics: dict[str, float]) -> dict[str, float]:
    """``{pair: mrr}`` from ``eval/bli/<pair>/mrr`` metrics (the average left out)."""
    return {key.split("/")[2]: value for key, value in metrics.items()
            if key.startswith("eval/bli/") and key.endswith("/mrr") and key != "eval/bli/avg/mrr"}


def relative_mrr_gain(current: dict[str, float], baseline: dict[str, float]) -> float:
    """BabelBERT's model-selection score: mean over pairs of (MRR - vanilla MRR) / vanilla MRR.

    Pairs whose vanilla MRR is 0 have no relative gain and are left out (NaN if none is left).
    """
    gains = [(current[pair] - base) / base for pair, base in baseline.items() if base > 0 and pair in current]
    return float(np.mean(gains)) if gains else float("nan")
