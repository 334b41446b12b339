"""The MLM validation loss (``eval/mlm/loss``): against Hugging Face's own masked-LM loss, and its wiring:
the held-out rows are tokenised and masked as the corpus stream's, with the same masks at every evaluation,
and a config that selects by it without held-out sentences is refused."""

import numpy as np
import pytest
import torch
from conftest import QUICKSTART, SMALL
from transformers import BertConfig, BertForMaskedLM

from distalign.config import ConfigError, load_config
from distalign.data.row_random import RowRandom
from distalign.data.synthetic import SyntheticConfig, generate_world
from distalign.eval.mlm_loss import MLM_LOSS_METRIC, held_out_rows, mlm_loss_metrics, mlm_loss_sums
from distalign.eval.selection import SELECTION_METRIC, selection_score
from distalign.objectives.mlm import IGNORE_INDEX, MLMMasking
from distalign.preparation.inputs import prepare_data
from distalign.preparation.ray_streams import staged_tokenizer, stream_jobs
from distalign.preparation.validation import mlm_validation_rows

V, T = 40, 9


def masked_batch(rows: int = 7, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, V, size=(rows, T))
    attention = np.ones((rows, T), dtype=np.int64)
    attention[::2, -3:] = 0  # padded rows
    labels = np.where((rng.random((rows, T)) < 0.4) & (attention == 1), ids, IGNORE_INDEX)
    labels[3] = IGNORE_INDEX  # a row with nothing to predict
    return {
        "masked_ids": ids,
        "attention_mask": attention,
        "labels": labels,
        "lang_id": np.array([0, 1, 0, 1, 1, 0, 1])[:rows],
    }


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return BertForMaskedLM(
        BertConfig(
            vocab_size=V,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=16,
        )
    )


def test_the_loss_is_hugging_faces_masked_lm_loss_per_language_and_overall(model):
    batch = masked_batch()
    sums = mlm_loss_sums(model, held_out_rows(batch), num_languages=3, batch_size=3, device=torch.device("cpu"))
    metrics = mlm_loss_metrics(sums, ["xa", "xb", "xc"])
    model.eval()
    with torch.no_grad():

        def hf_loss(rows):
            out = model(
                input_ids=torch.from_numpy(batch["masked_ids"][rows]),
                attention_mask=torch.from_numpy(batch["attention_mask"][rows]),
                labels=torch.from_numpy(batch["labels"][rows]),
            )
            return out.loss.item()

        assert metrics[MLM_LOSS_METRIC] == pytest.approx(hf_loss(np.arange(7)), rel=1e-6)
        assert metrics["eval/mlm/xa/loss"] == pytest.approx(hf_loss(np.array([0, 2, 5])), rel=1e-6)
        assert metrics["eval/mlm/xb/loss"] == pytest.approx(hf_loss(np.array([1, 3, 4, 6])), rel=1e-6)
    assert "eval/mlm/xc/loss" not in metrics  # no labelled token: no value rather than 0/0
    assert sums[:, 1].tolist() == [(batch["labels"][batch["lang_id"] == k] != IGNORE_INDEX).sum() for k in range(3)]


def test_ranks_scoring_disjoint_rows_add_up_to_the_whole_and_dropout_is_off(model):
    batch, cpu = masked_batch(), torch.device("cpu")
    model.train()
    whole = mlm_loss_sums(model, held_out_rows(batch), 2, 4, cpu)
    parts = sum(
        mlm_loss_sums(model, held_out_rows({k: v[rank::2] for k, v in batch.items()}), 2, 4, cpu) for rank in (0, 1)
    )
    assert torch.allclose(whole, parts)
    assert model.training  # left as it was found


def test_metrics_from_hand_sums():
    sums = torch.tensor([[6.0, 3.0], [4.0, 1.0], [0.0, 0.0]], dtype=torch.float64)
    assert mlm_loss_metrics(sums, ["a", "b", "c"]) == {
        "eval/mlm/a/loss": 2.0,
        "eval/mlm/b/loss": 4.0,
        MLM_LOSS_METRIC: 2.5,
    }


def test_select_by_names_the_metric_and_its_direction():
    assert selection_score("mlm_loss") == (MLM_LOSS_METRIC, "min")
    assert selection_score("bli") == (SELECTION_METRIC, "max")


def test_held_out_sentences_do_not_change_the_world_they_are_drawn_from(tmp_path):
    plain = generate_world(SyntheticConfig(num_concepts=40, sentences_per_language=50), tmp_path / "plain")
    held = generate_world(
        SyntheticConfig(num_concepts=40, sentences_per_language=50, validation_sentences=20), tmp_path / "held"
    )
    for lang in plain.languages:
        assert plain.corpora[lang].read_text() == held.corpora[lang].read_text()
        assert not plain.validation_corpora[lang].exists()
        assert len(held.validation_corpora[lang].read_text().splitlines()) == 20
    assert (tmp_path / "plain" / "constraints.parquet").read_bytes() == (
        tmp_path / "held" / "constraints.parquet"
    ).read_bytes()


def test_held_out_rows_are_masked_as_the_corpus_stream_masks_and_the_same_every_time(distalign_home):
    config = load_config(
        QUICKSTART,
        SMALL + ["run.name=mlm-validation", "data.synthetic.validation_sentences=30", "eval.select_by=mlm_loss"],
    )
    prepared = prepare_data(config)
    assert sorted(prepared.validation["lang"].to_pylist()) == sorted(["xa", "xb", "xc"] * 30)
    held = mlm_validation_rows(prepared, config)
    again = mlm_validation_rows(prepared, config)
    assert all(np.array_equal(held.tokens[key], again.tokens[key]) for key in held.tokens)
    assert all(values.dtype == np.int32 for values in held.tokens.values())  # unpadded int32
    assert held.lengths.sum() == len(held.tokens["labels"]) < held.lengths.max() * len(held)
    # the run's masking (quickstart: whole words, mask_prob 0.15) drawn per row from (seed, epoch 0, row)
    job = stream_jobs(prepared, config, ("corpus",))["corpus"]
    columns = {
        name: prepared.validation[name].to_numpy(zero_copy_only=False) for name in prepared.validation.column_names
    }
    batch = job.stream.tokenize(columns, staged_tokenizer(job.tokenizer_path, ""), job.settings)
    masking = MLMMasking.for_tokenizer(
        prepared.model_path, config.objectives.mlm.mask_prob, config.objectives.mlm.granularity
    )
    expected = masking(
        {"input_ids": batch["input_ids"], "word_ids": batch["word_ids"]},
        RowRandom(config.train.seed, [0] * len(batch["row"]), batch["row"].tolist()),
    )
    assert np.array_equal(held.padded(held.width)["labels"], expected["labels"])  # padded back: the same targets
    words = {(r, batch["word_ids"][r, c]) for r, c in zip(*np.nonzero(batch["word_ids"] >= 0))}
    masked_words = {(r, batch["word_ids"][r, c]) for r, c in zip(*np.nonzero(expected["labels"] != IGNORE_INDEX))}
    assert 0.08 < len(masked_words) / len(words) < 0.22  # about mask_prob of the words


@pytest.mark.parametrize(
    "overrides, key",
    [
        (["eval.select_by=mlm_loss"], "eval.select_by"),
        (["data.synthetic.validation_sentences=10", "objectives.mlm.weight=0"], "data.synthetic.validation_sentences"),
    ],
)
def test_selection_by_mlm_loss_needs_held_out_sentences_and_the_mlm_head(overrides, key):
    with pytest.raises(ConfigError, match=key):
        load_config(QUICKSTART, SMALL + overrides)
