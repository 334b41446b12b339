"""TLM (XLM's translation language modelling): the pair layout, positions and languages against a hand
computation, masking on both sides, the loss against a plain masked-LM call, the parallel readers' bad rows,
config errors, the share of TLM sequences in a step of MLM + TLM on real prepared batches, and MLM + TLM on two
workers over a corpus file with a bad row (reported by the run)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import transformers
from conftest import QUICKSTART, SMALL
from tiny_tokenizers import wordpiece_tokenizer

from distalign.config import load_config
from distalign.data.readers import read_parallel_files, read_parallel_tsv
from distalign.data.row_random import RowRandom
from distalign.data.stream_plugins import STREAMS
from distalign.errors import ConfigError, InputError
from distalign.objectives.mlm import IGNORE_INDEX, MLMMasking
from distalign.objectives.tlm import TLMObjective
from distalign.preparation.inputs import prepare_data
from distalign.preparation.ray_streams import local_streams

STREAM = STREAMS["parallel"]


@pytest.fixture(scope="module")
def wordpiece():
    return wordpiece_tokenizer(["the cat sat on the mat", "le chat est assis sur le tapis"] * 10, 80)


def encode(tokenizer, max_length=12):
    batch = {
        "text1": np.array(["the cat sat", "mat"]),
        "lang1": np.array(["en", "en"]),
        "text2": np.array(["le chat", "le tapis est"]),
        "lang2": np.array(["fr", "fr"]),
        "row": np.array([0, 1]),
    }
    return STREAM.tokenize(batch, tokenizer, STREAM.Settings(max_length, ("en", "fr")))


def test_pair_layout_positions_and_languages_by_hand(wordpiece):
    out = encode(wordpiece)
    tokens = [wordpiece.convert_ids_to_tokens(row) for row in out["input_ids"]]
    assert tokens[0] == ["[CLS]", "the", "cat", "sat", "[SEP]", "le", "chat", "[SEP]"] + ["[PAD]"] * 4
    assert tokens[1] == ["[CLS]", "mat", "[SEP]", "le", "tapis", "est", "[SEP]"] + ["[PAD]"] * 5
    assert out["attention_mask"].tolist() == [[1] * 8 + [0] * 4, [1] * 7 + [0] * 5]
    # the second sentence's words numbered after the first's
    assert out["word_ids"].tolist() == [[-1, 0, 1, 2, -1, 3, 4, -1] + [-1] * 4, [-1, 0, -1, 1, 2, 3, -1] + [-1] * 5]
    # XLM: positions restart at the second sentence, at the position its first word has alone ([CLS] b [SEP])
    assert out["positions"].tolist() == [[0, 1, 2, 3, 4, 1, 2, 3] + [0] * 4, [0, 1, 2, 1, 2, 3, 4] + [0] * 5]
    # en = 0, fr = 1: the first part (with the separator between the sides) en, the second fr, padding en
    assert out["lang_ids"].tolist() == [[0] * 5 + [1] * 3 + [0] * 4, [0] * 3 + [1] * 4 + [0] * 5]
    assert out["row"].tolist() == [0, 1]


def test_each_side_keeps_at_most_half_of_the_room(wordpiece):
    out = encode(wordpiece, max_length=7)  # 3 specials: 2 tokens a side
    tokens = wordpiece.convert_ids_to_tokens(out["input_ids"][0])
    assert tokens == ["[CLS]", "the", "cat", "[SEP]", "le", "chat", "[SEP]"]
    assert wordpiece.convert_ids_to_tokens(out["input_ids"][1]) == [
        "[CLS]",
        "mat",
        "[SEP]",
        "le",
        "tapis",
        "[SEP]",
        "[PAD]",
    ]


def test_masking_labels_words_on_both_sides(wordpiece):
    out = encode(wordpiece)
    masking = MLMMasking(wordpiece.mask_token_id, len(wordpiece), mask_prob=0.999)  # every word selected
    masked = masking(out, RowRandom(seed=0, epoch=0, rows=out["row"]))
    words = out["word_ids"] >= 0
    assert (masked["labels"][words] == out["input_ids"][words]).all()
    assert (masked["labels"][~words] == IGNORE_INDEX).all()
    assert (masked["labels"][out["lang_ids"] == 1] != IGNORE_INDEX).any()  # the translation side is masked too
    assert (masked["masked_ids"][~words] == out["input_ids"][~words]).all()


def tiny_xlmr(vocab_size):
    torch.manual_seed(0)
    config = transformers.XLMRobertaConfig(
        vocab_size=vocab_size,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=40,
        pad_token_id=1,
    )
    return transformers.XLMRobertaForMaskedLM(config).eval()


class Model:  # what an objective's forward reads of the training model
    def __init__(self, masked_lm):
        self.masked_lm = masked_lm


def test_loss_is_the_masked_lm_cross_entropy_with_reset_positions():
    masked_lm = tiny_xlmr(30)
    ids = torch.tensor([[0, 5, 6, 2, 2, 7, 8, 9, 2, 1, 1]])  # <s> a a </s></s> b b b </s> <pad> <pad>
    attention = (ids != 1).long()
    positions = torch.tensor([[0, 1, 2, 3, 4, 1, 2, 3, 4, 0, 0]])
    labels = torch.full_like(ids, IGNORE_INDEX)
    labels[0, [1, 6]] = torch.tensor([5, 8])
    masked = ids.clone()
    masked[0, [1, 6]] = 3
    batch = {
        "masked_ids": masked,
        "attention_mask": attention,
        "labels": labels,
        "lang_ids": torch.tensor([[0] * 5 + [1] * 4 + [0] * 2]),
        "positions": positions,
    }
    objective = TLMObjective(16, 2)
    loss = objective(Model(masked_lm), batch)
    # by hand: XLM-R numbers positions from padding_idx + 1 = 2; the second sentence restarts at 3; padding 1
    hand_positions = torch.tensor([[2, 3, 4, 5, 6, 3, 4, 5, 6, 1, 1]])
    logits = masked_lm(input_ids=masked, attention_mask=attention, position_ids=hand_positions).logits[0]
    hand = -(torch.log_softmax(logits[1], -1)[5] + torch.log_softmax(logits[6], -1)[8]) / 2
    torch.testing.assert_close(loss, hand)  # zero-initialised language embeddings: the plain model at step 0
    # the sequential positions XLM-R derives itself give another loss: the reset reaches the model
    plain = TLMObjective(16, 2, language_embeddings=False, reset_positions=False)(Model(masked_lm), batch)
    assert not torch.isclose(plain, hand)
    with torch.no_grad():
        objective.language_embeddings.embedding.weight[1] = torch.linspace(-1, 1, 16)  # second language
    assert not torch.isclose(objective(Model(masked_lm), batch), hand)


def test_tsv_reader_counts_bad_rows_with_file_and_line(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("the cat\tle chat\nonly one side\n\na\tb\tc\n\tvide\nmat\ttapis\n")
    table, report = read_parallel_tsv(path, "en", "fr")
    assert table.to_pylist() == [
        {"text1": "the cat", "lang1": "en", "text2": "le chat", "lang2": "fr"},
        {"text1": "mat", "lang1": "en", "text2": "tapis", "lang2": "fr"},
    ]
    assert report.rows == 2 and report.malformed == 3
    assert [e.split(": ")[0] for e in report.examples] == [f"{path}:2", f"{path}:4", f"{path}:5"]


def test_aligned_files_reader(tmp_path):
    en, fr = tmp_path / "a.en", tmp_path / "a.fr"
    en.write_text("the cat\n\nmat\nsat\n")
    fr.write_text("le chat\nvide\ntapis\n\n")
    table, report = read_parallel_files(en, fr, "en", "fr")
    assert table["text1"].to_pylist() == ["the cat", "mat"] and table["text2"].to_pylist() == ["le chat", "tapis"]
    assert report.malformed == 2 and report.examples[0].startswith(f"{en}:2: ")
    fr.write_text("le chat\n")
    with pytest.raises(InputError, match="not line-aligned"):
        read_parallel_files(en, fr, "en", "fr")


def write_pairs(path, count):
    """Pairs of made-up xa/xb words (the tiny tokenizer also trains on them)."""
    rng = np.random.default_rng(0)
    words = [(f"ka{i}", f"bo{i}") for i in range(30)]
    lines = []
    for _ in range(count):
        chosen = [words[i] for i in rng.choice(len(words), size=5)]
        lines.append(" ".join(a for a, _ in chosen) + "\t" + " ".join(b for _, b in chosen))
    path.write_text("\n".join(lines) + "\n")
    return path


def tlm_config(path, *extra):
    return load_config(
        QUICKSTART,
        SMALL
        + [
            "run.name=tlm",
            "objectives.lexical.weight=0",
            "objectives.tlm.weight=1",
            f'data.parallel=[{{path: "{path}", lang1: xa, lang2: xb}}]',
            *extra,
        ],
    )


def test_config_errors_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"data\.parallel"):
        load_config(QUICKSTART, SMALL + ["objectives.tlm.weight=1"])
    with pytest.raises(ConfigError, match=r"data\.parallel\[0\]\.path"):
        tlm_config(tmp_path / "missing.tsv")
    half = f'data.parallel=[{{path1: "{write_pairs(tmp_path / "p.tsv", 2)}", lang1: xa, lang2: xb}}]'
    with pytest.raises(ConfigError, match=r"data\.parallel\[0\].*path1 and path2"):
        load_config(QUICKSTART, SMALL + ["objectives.tlm.weight=1", half])


def test_tlm_share_of_a_step_on_prepared_batches(tmp_path, monkeypatch):
    """MLM + TLM: each step holds parallel_batch_size masked pairs beside corpus_batch_size masked sentences,
    TLM's share 4 / (4 + 16) = 0.2 (ALIGN-MLM's 25 % parallel data relative to MLM), both sides labelled."""
    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path))
    config = tlm_config(
        write_pairs(tmp_path / "pairs.tsv", 200),
        "train.parallel_batch_size=4",
        "train.corpus_batch_size=16",
        "objectives.tlm.mask_prob=0.3",
    )
    prepared = prepare_data(config)
    assert len(prepared.parallel) == 200 and {"xa", "xb"} <= set(prepared.languages)
    streams = local_streams(prepared, config)
    assert set(streams) == {"corpus", "parallel"}
    tlm_rows = mlm_rows = 0
    side_words = {0: [0, 0], 1: [0, 0]}  # side -> [words, labelled words]
    xb = prepared.languages.index("xb")
    for _ in range(30):
        step = {name: next(stream) for name, stream in streams.items()}
        tlm_rows += int((step["parallel"]["labels"] != IGNORE_INDEX).any(1).sum())
        mlm_rows += len(step["corpus"]["labels"])
        assert len(step["parallel"]["row"]) == 4
        batch = step["parallel"]
        for row in range(4):
            for side in (0, 1):
                on_side = (batch["word_ids"][row] >= 0) & ((batch["lang_ids"][row] == xb) == bool(side))
                words = set(batch["word_ids"][row][on_side].tolist())
                marked = set(batch["word_ids"][row][on_side & (batch["labels"][row] != IGNORE_INDEX)].tolist())
                side_words[side][0] += len(words)
                side_words[side][1] += len(marked)
    # a pair of 10 words with none masked at 0.3 happens with p = 0.7^10 ≈ 3 %
    assert 0.18 <= tlm_rows / (tlm_rows + mlm_rows) <= 0.2
    for words, labelled in side_words.values():
        assert 0.24 <= labelled / words <= 0.36


def test_parallel_share_keeps_a_share_of_the_corpus_and_only_those_pairs_reach_the_loss(tmp_path, monkeypatch):
    """objectives.tlm.parallel_share (ALIGN-MLM's Table 1): 10 % of the xa corpus's sentences, as distinct pairs
    drawn from those read; every TLM sequence of the steps comes from a kept pair, and they all come round."""
    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path))
    pairs = write_pairs(tmp_path / "pairs.tsv", 400)
    config = tlm_config(
        pairs, "train.parallel_batch_size=4", "train.corpus_batch_size=16", "objectives.tlm.parallel_share=0.1"
    )
    prepared = prepare_data(config)
    (xa,) = [src for src in prepared.corpus.sources if src.lang == "xa"]
    corpus_xa = sum(1 for path in xa.paths for line in open(path) if line.strip())
    kept = round(0.1 * corpus_xa)
    assert len(prepared.parallel) == kept < 400
    read = set(zip(*(read_parallel_tsv(pairs, "xa", "xb")[0][c].to_pylist() for c in ("text1", "text2"))))
    chosen = set(zip(prepared.parallel["text1"].to_pylist(), prepared.parallel["text2"].to_pylist()))
    assert chosen <= read
    stream = local_streams(prepared, config)["parallel"]
    seen = set()
    for _ in range(3 * kept // 4):
        seen.update(next(stream)["row"].tolist())
    assert seen == set(range(kept))  # the rows of the kept pairs, each reached, no other
    whole = prepare_data(tlm_config(pairs, "train.parallel_batch_size=4"))
    assert whole.model_path == prepared.model_path  # the tokenizer learns from every pair read either way
    with pytest.raises(ConfigError, match=r"objectives\.tlm\.parallel_share"):
        prepare_data(tlm_config(write_pairs(tmp_path / "few.tsv", kept), "objectives.tlm.parallel_share=0.2"))
    with pytest.raises(ConfigError, match=r"objectives\.tlm\.parallel_share"):
        tlm_config(pairs, "objectives.tlm.parallel_share=0")


def test_mlm_plus_tlm_trains_on_two_workers_over_a_corpus_with_bad_rows_and_reports_them(
    ray_local, distalign_home, tmp_path
):
    """MLM on a corpus file with a cut-off row beside TLM on pairs: the run trains both and finishes; the bad row is
    skipped and reported as the run's data/skipped_corpus_rows."""
    from mlflow.tracking import MlflowClient

    from distalign.train.trainer import run_training

    lines = [json.dumps({"text": f"xa{i % 7} xa{i % 5} xa{i % 3}"}) for i in range(200)]
    lines[17] = '{"text": "cut sh'
    (tmp_path / "xa.jsonl").write_text("\n".join(lines) + "\n")
    config = tlm_config(
        write_pairs(tmp_path / "pairs.tsv", 64),
        "run.name=tlm-ray",
        "train.max_steps=4",
        "train.parallel_batch_size=4",
        "data.source=files",
        f"data.corpora=[{{path: {tmp_path / 'xa.jsonl'}, lang: xa}}]",
        "eval.every=0",
    )
    assert config.objectives.streams() == {"corpus", "parallel"} and config.train.num_workers == 2
    outcome = run_training(config)
    client = MlflowClient(config.tracking.uri)
    run = client.get_run(outcome.run_id)
    assert run.info.status == "FINISHED"
    for name in ("Train/tlm_loss", "Train/mlm_loss"):
        losses = client.get_metric_history(outcome.run_id, name)
        assert [m.step for m in losses] == [2, 4]
        assert all(np.isfinite(m.value) and m.value > 0 for m in losses)
    assert run.data.metrics["data/skipped_corpus_rows"] == 1
    assert outcome.metrics["step"] == config.train.max_steps
