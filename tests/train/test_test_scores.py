"""The final test score of a run (``eval.test_languages``): the in-loop BLI of the selected checkpoint's model on
the test pairs, renamed ``test/bli/...``, with the checkpoint's step (no Ray: the scoring function itself)."""

import random

import pytest
import ray.train
from conftest import QUICKSTART

from distalign.checkpoint import MODEL_DIR, TrainerState, write_state
from distalign.config import TinyModelConfig, load_config
from distalign.eval.distributed import load_encoder
from distalign.eval.selection import evaluate_bli, in_loop_settings
from distalign.models.loading import build_tiny_model
from distalign.preparation.prepared import BLIPairs
from distalign.train.final_scores import TEST_STEP, _score, bli_test_sets

EN = ["dog", "cat", "house", "tree", "river", "stone"]
FI = ["koira", "kissa", "talo", "puu", "joki", "kivi"]


def test_test_scores_are_the_in_loop_bli_of_the_checkpoint_renamed(tmp_path):
    rng = random.Random(0)
    texts = [" ".join(rng.choices(words, k=5)) for words in (EN, FI) for _ in range(60)]
    directory = tmp_path / "checkpoint_000001"
    build_tiny_model(
        directory / MODEL_DIR,
        texts,
        TinyModelConfig(vocab_size=200, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=32),
    )
    write_state(directory, TrainerState(step=20))
    config = load_config(QUICKSTART)
    sets = bli_test_sets(config, [BLIPairs("fi", "en", FI, EN)])
    scores = _score(
        ray.train.Checkpoint.from_directory(str(directory)),
        sets,
        in_loop_settings(config.eval, config.model, seed=config.train.seed),
    )
    model, tokenizer = load_encoder(str(directory / MODEL_DIR))
    expected = evaluate_bli(model, tokenizer, sets, in_loop_settings(config.eval, config.model, seed=config.train.seed))
    assert scores == {
        "test/bli/fi-en/mrr": pytest.approx(expected["eval/bli/fi-en/mrr"]),
        "test/bli/avg/mrr": pytest.approx(expected["eval/bli/avg/mrr"]),
        TEST_STEP: 20,
    }
    assert 0 < scores["test/bli/avg/mrr"] <= 1
