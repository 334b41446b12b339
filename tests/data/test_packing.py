"""Packed corpus sequences (``data.pack_sequences``): consecutive sentences of one language up to the
sequence length, as BERT's and ALIGN-MLM's pre-training instances; what reaches the MLM from them."""

import numpy as np
import pytest
from conftest import QUICKSTART, SMALL
from tiny_tokenizers import tokenizer_of_kind

from distalign.config import ConfigError, load_config
from distalign.data.tokenize import encode_packed_sentences, encode_sentences, special_tokens_around

SENTENCES = [
    "the cat sat on the mat",
    "der hund bellt",
    "a dog barked at the cat",
    "die katze schlaeft",
    "it rained",
    "es regnet heute nicht",
    "the end",
]
LANGS = [0, 1, 0, 1, 0, 1, 0]


@pytest.fixture(scope="module", params=["bert", "xlmr"])
def tokenizer(request, tmp_path_factory):
    return tokenizer_of_kind(request.param, SENTENCES * 3, tmp_path_factory.mktemp("models") / "tiny")


def test_consecutive_sentences_of_one_language_fill_each_sequence(tokenizer):
    max_length = 24
    packed = encode_packed_sentences(tokenizer, SENTENCES, LANGS, list(range(100, 107)), max_length)
    alone = [
        tokenizer([s.split()], is_split_into_words=True, add_special_tokens=False)["input_ids"][0] for s in SENTENCES
    ]
    prefix, suffix = special_tokens_around(tokenizer)
    room = max_length - len(prefix) - len(suffix)
    # the greedy packing by hand: per language, add the next sentence while it fits
    expected, open_seq = [], {}
    for i, lang in enumerate(LANGS):
        if lang not in open_seq or sum(len(alone[j]) for j in expected[open_seq[lang]]) + len(alone[i]) > room:
            expected.append([])
            open_seq[lang] = len(expected) - 1
        expected[open_seq[lang]].append(i)
    assert len(packed["row"]) == len(expected) < len(SENTENCES)
    for r, members in enumerate(expected):
        content = [t for j in members for t in alone[j]]
        full = prefix + content + suffix
        assert packed["input_ids"][r, : len(full)].tolist() == full and packed["attention_mask"][r].sum() == len(full)
        assert packed["row"][r] == 100 + members[0] and packed["lang_id"][r] == LANGS[members[0]]
        words = packed["word_ids"][r][packed["word_ids"][r] >= 0]
        assert words.tolist() == sorted(words.tolist()) and words.max() + 1 == sum(
            len(SENTENCES[j].split()) for j in members
        )


def test_a_sentence_longer_than_a_sequence_is_truncated_alone(tokenizer):
    long = " ".join(["cat"] * 30)
    packed = encode_packed_sentences(tokenizer, ["the end", long, "it rained"], [0, 0, 0], [0, 1, 2], 12)
    single = encode_sentences(tokenizer, [long], 12)
    assert len(packed["row"]) == 3 and packed["row"].tolist() == [0, 1, 2]
    assert packed["input_ids"][1].tolist() == single["input_ids"][0].tolist()
    assert packed["word_ids"][1].tolist() == single["word_ids"][0].tolist()


def test_packing_fills_the_mlm_s_sequences_and_keeps_its_share_of_masked_words(tmp_path, monkeypatch):
    from distalign.objectives.mlm import IGNORE_INDEX
    from distalign.preparation.inputs import prepare_data
    from distalign.preparation.ray_streams import local_streams

    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path))
    filled = {}
    for pack in (False, True):
        config = load_config(
            QUICKSTART,
            SMALL
            + [
                f"run.name=pack-{pack}",
                f"data.pack_sequences={pack}",
                "objectives.lexical.weight=0",
                "data.max_seq_length=64",
            ],
        )
        stream = local_streams(prepare_data(config), config)["corpus"]
        batches = [next(stream) for _ in range(8)]
        filled[pack] = np.mean([b["attention_mask"].float().mean().item() for b in batches])
        words = sum(int(len(set(zip(*np.nonzero(b["word_ids"].numpy() >= 0))))) for b in batches)
        masked = sum(int((b["labels"] != IGNORE_INDEX).sum()) for b in batches)
        assert 0.10 < masked / words < 0.22  # 15 % of the words' tokens (whole-word masking)
    assert filled[True] > 3 * filled[False] and filled[True] > 0.7  # 0.76 against 0.21 here


def test_packing_is_the_default_and_refused_by_name_where_a_sentence_must_stay_alone():
    assert load_config(QUICKSTART).data.pack_sequences
    with pytest.raises(ConfigError, match="data.pack_sequences.*or set data.pack_sequences=false"):
        load_config(QUICKSTART, ["train.epochs=2", "objectives.lexical.weight=0"])
    with pytest.raises(ConfigError, match="objectives.dict_mlm.tlm.*set data.pack_sequences=false"):
        load_config(
            QUICKSTART, ["objectives.mlm.weight=0", "objectives.dict_mlm.weight=1", "objectives.dict_mlm.tlm=true"]
        )
    load_config(
        QUICKSTART,
        [
            "objectives.mlm.weight=0",
            "objectives.dict_mlm.weight=1",
            "objectives.dict_mlm.tlm=true",
            "data.pack_sequences=false",
        ],
    )
