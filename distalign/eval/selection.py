"""Model selection inside the training loop: BLI on held-out dictionary pairs, one layer, MRR per
language pair, and the relative MRR gain over the vanilla model that ranks checkpoints.

The test sets are built by ``distalign.eval.tasks.bli.build_test_set`` with the run's ``in_loop_settings``, as
``distalign eval --checkpoint ... --dictionary ...`` builds them from the checkpoint's saved config. The target
vocabulary of a pair is the top of a frequency list (``eval.vocab_dir``; BabelBERT validates against 100K words,
lower-cased like the shared lists), else the set of distinct target words of its dictionary as written.
"""

from __future__ import annotations

import numpy as np

from distalign.config import EvalConfig, ModelConfig
from distalign.eval.local_evaluation import EncodingSettings, evaluate_locally
from distalign.eval.mlm_loss import MLM_LOSS_METRIC
from distalign.eval.tasks.bli import BLISettings, BLITask


def in_loop_settings(evaluation: EvalConfig, model: ModelConfig, seed: int) -> BLISettings:
    """The in-loop BLI's test-set and encoder settings of a run: its ``eval`` and ``model`` sections and its
    ``train.seed``."""
    return BLISettings(
        max_pairs=evaluation.bli_max_pairs,
        seed=seed,
        ranking=evaluation.bli_ranking,
        vocab_dir=evaluation.vocab_dir,
        vocab_size=evaluation.vocab_size,
        layer=model.word_layer,
        max_word_tokens=model.max_word_tokens,
    )


def encoding_settings(settings: BLISettings) -> EncodingSettings:
    return EncodingSettings(max_word_tokens=settings.max_word_tokens)


def evaluate_bli(model, tokenizer, test_sets: list[BLITask], settings: BLISettings) -> dict[str, float]:
    """``eval/bli/<l1>-<l2>/mrr`` for each set and their mean ``eval/bli/avg/mrr``, at ``settings.layer``."""
    rows = evaluate_locally(model, tokenizer, test_sets, [settings.layer], encoding_settings(settings))
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
    return {
        key.split("/")[2]: value
        for key, value in metrics.items()
        if key.startswith("eval/bli/") and key.endswith("/mrr") and key != "eval/bli/avg/mrr"
    }


def relative_mrr_gain(current: dict[str, float], baseline: dict[str, float]) -> float:
    """BabelBERT's model-selection score: mean over pairs of (MRR - vanilla MRR) / vanilla MRR.

    Pairs whose vanilla MRR is 0 have no relative gain and are left out (NaN if none is left).
    """
    gains = [(current[pair] - base) / base for pair, base in baseline.items() if base > 0 and pair in current]
    return float(np.mean(gains)) if gains else float("nan")
