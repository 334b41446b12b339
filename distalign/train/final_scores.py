"""The final test score of a run: BLI on the test pairs (``eval.test_languages``), once, after training, from
the selected checkpoint (the best by ``eval.select_by``'s score on the validation data, else the last).

BabelBERT §5.1 selects on validation pairs and reports its test benchmark after training; the scores are the
in-loop evaluation's (``evaluate_bli``: same test-set construction, ranking, vocabulary and word layer), logged
as ``test/bli/<pair>/mrr`` and ``test/bli/avg/mrr`` at the selected checkpoint's step.
"""

from __future__ import annotations

from pathlib import Path

import ray
import ray.train

from distalign.config import ExperimentConfig
from distalign.eval.selection import evaluate_bli, in_loop_settings
from distalign.eval.tasks import BLITask
from distalign.eval.tasks.bli import BLISettings, build_test_set
from distalign.preparation.prepared import BLIPairs

EVAL_PREFIX, TEST_PREFIX = "eval/bli/", "test/bli/"
TEST_METRIC = f"{TEST_PREFIX}avg/mrr"
TEST_STEP = "test/step"  # the step of the checkpoint the test scores come from


def bli_test_sets(config: ExperimentConfig, pairs: list[BLIPairs]) -> list[BLITask]:
    """The BLI tasks of held-out pairs, as the in-loop evaluation builds them (validation and test alike)."""
    settings = in_loop_settings(config.eval, config.model, seed=config.train.seed)
    return [build_test_set(p.lang1, p.lang2, p.src, p.tgt, settings, p.vocab) for p in pairs]


def _score(checkpoint: ray.train.Checkpoint, test_sets: list[BLITask], settings: BLISettings) -> dict[str, float]:
    from distalign.checkpoint import MODEL_DIR, read_state
    from distalign.eval.distributed import load_encoder

    with checkpoint.as_directory() as directory:
        model, tokenizer = load_encoder(str(Path(directory) / MODEL_DIR))
        metrics = evaluate_bli(model, tokenizer, test_sets, settings)
        step = read_state(Path(directory)).step
    return {TEST_PREFIX + key.removeprefix(EVAL_PREFIX): value for key, value in metrics.items()} | {TEST_STEP: step}


def score_test_pairs(
    config: ExperimentConfig, test_sets: list[BLITask], checkpoint: ray.train.Checkpoint
) -> dict[str, float]:
    """``test/bli/...`` and ``test/step`` of ``checkpoint``, scored by one Ray task with a training worker's
    resources (its GPU with ``train.use_gpu``), which the finished trainer has given back. The task is
    scheduled outside the caller's placement group (a Tune trial's holds only the trial function)."""
    t = config.train
    task = ray.remote(_score).options(
        num_cpus=t.cpus_per_worker, num_gpus=int(t.use_gpu), scheduling_strategy="DEFAULT", name="distalign-test-scores"
    )
    return ray.get(
        task.remote(checkpoint, test_sets, in_loop_settings(config.eval, config.model, seed=config.train.seed))
    )
