"""DICT-MLM: synonym table, dictionary-restricted masking, synonyms spliced in, dict-TLM layout, loss."""

import dataclasses

import numpy as np
import pyarrow as pa
import pytest
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, XLMRobertaConfig, XLMRobertaForMaskedLM

from distalign.data.row_random import RowRandom
from distalign.models.encoder import Encoder
from distalign.objectives.dict_mlm import (
    DictMLMMasking,
    DictMLMObjective,
    build_synonym_table,
    code_switch_concat,
    dict_mlm_mask,
    dictionary_entry_ids,
    mask_dict_mlm_batch,
    pick_synonyms,
    splice_synonyms,
)
from distalign.objectives.mlm import IGNORE_INDEX, whole_word_mask
from distalign.train.module import TrainingModule

PAD, UNK, CLS, SEP, MASK = range(5)
# Hand-made WordPiece vocabulary: maison = ma ##ison, chien = chi ##en, cane = ca ##ne, gatto = gat ##to.
VOCAB = {
    t: i
    for i, t in enumerate(
        [
            "[PAD]",
            "[UNK]",
            "[CLS]",
            "[SEP]",
            "[MASK]",
            "house",
            "haus",
            "ma",
            "##ison",
            "casa",
            "logis",
            "foyer",
            "demeure",
            "dog",
            "hund",
            "chi",
            "##en",
            "ca",
            "##ne",
            "big",
            "home",
            "cat",
            "gat",
            "##to",
        ]
    )
}
HOUSE, HAUS, MA, ISON, CASA, LOGIS, FOYER, DEMEURE, DOG, HUND, CHI, EN_, CA, NE, BIG = range(5, 20)
CAT, GAT, TO = range(21, 24)
LANGUAGES = ["en", "de", "fr", "it"]
EN, DE, FR, IT = range(4)
LANG_OF_LABEL = {HOUSE: EN, HAUS: DE, CASA: IT, LOGIS: FR, FOYER: FR, DEMEURE: FR}
PAIRS = [
    ("house", "en", "haus", "de"),
    ("house", "en", "maison", "fr"),  # 1 vs 2 subwords: spliced in whole
    ("house", "en", "casa", "it"),
    ("house", "en", "logis", "fr"),
    ("house", "en", "foyer", "fr"),
    ("house", "en", "demeure", "fr"),
    ("dog", "en", "hund", "de"),
    ("dog", "en", "chien", "fr"),  # 1 vs 2 subwords: spliced in whole
    ("chien", "fr", "cane", "it"),
    ("house", "en", "home", "en"),  # same language: dropped
    ("dog house", "en", "hundehaus", "de"),  # multi-word: dropped
    ("cat", "en", "gatto", "it"),  # 1 vs 2 subwords, the only synonym either way
]


@pytest.fixture(scope="module")
def tokenizer():
    wordpiece = Tokenizer(models.WordPiece(VOCAB, unk_token="[UNK]"))
    wordpiece.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=wordpiece,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )


@pytest.fixture(scope="module")
def table(tokenizer):
    columns = list(zip(*PAIRS))
    dictionary = pa.table({name: list(col) for name, col in zip(["word1", "lang1", "word2", "lang2"], columns)})
    return build_synonym_table(dictionary, tokenizer, LANGUAGES)


def synonyms_of(table, entry):
    """{target language: {synonym token ids}} of an entry, read back from the offset tensors."""
    out = {}
    for g in range(table.group_offsets[entry], table.group_offsets[entry + 1]):
        rows = table.synonym_ids[table.synonym_offsets[g] : table.synonym_offsets[g + 1]]
        out[int(table.group_lang[g])] = {tuple(t for t in row.tolist() if t >= 0) for row in rows}
    return out


# ------------------------------------------------------------------------------ synonym table
def test_synonym_table_by_hand(table):
    expected = {
        (EN, (HOUSE,)): {DE: {(HAUS,)}, IT: {(CASA,)}, FR: {(LOGIS,), (FOYER,), (DEMEURE,), (MA, ISON)}},
        (DE, (HAUS,)): {EN: {(HOUSE,)}},
        (IT, (CASA,)): {EN: {(HOUSE,)}},
        (FR, (MA, ISON)): {EN: {(HOUSE,)}},
        (FR, (LOGIS,)): {EN: {(HOUSE,)}},
        (FR, (FOYER,)): {EN: {(HOUSE,)}},
        (FR, (DEMEURE,)): {EN: {(HOUSE,)}},
        (EN, (DOG,)): {DE: {(HUND,)}, FR: {(CHI, EN_)}},
        (DE, (HUND,)): {EN: {(DOG,)}},
        (FR, (CHI, EN_)): {IT: {(CA, NE)}, EN: {(DOG,)}},
        (IT, (CA, NE)): {FR: {(CHI, EN_)}},
        (EN, (CAT,)): {IT: {(GAT, TO)}},
        (IT, (GAT, TO)): {EN: {(CAT,)}},
    }
    assert {key: synonyms_of(table, e) for key, e in table.entries.items()} == expected
    # pairs of different subword lengths are kept (before: dropped as "length_mismatch")
    assert table.dropped == {"same_language": 1, "multiword": 1}
    # each synonym's own entry is the (its language, its tokens) key
    for e in table.entries.values():
        for g in range(table.group_offsets[e], table.group_offsets[e + 1]):
            for s in range(table.synonym_offsets[g], table.synonym_offsets[g + 1]):
                own = (int(table.group_lang[g]), tuple(t for t in table.synonym_ids[s].tolist() if t >= 0))
                assert table.entries[own] == table.synonym_entry[s]


def test_bad_dictionary_raises_value_errors(tokenizer):
    with pytest.raises(ValueError, match="missing column"):
        build_synonym_table(pa.table({"word1": ["a"], "lang1": ["en"], "word2": ["b"]}), tokenizer, LANGUAGES)
    bad_lang = pa.table(
        {"word1": ["dog", "dog"], "lang1": ["en", "en"], "word2": ["hund", "hund"], "lang2": ["de", "xx"]}
    )
    with pytest.raises(ValueError, match="row 1: language 'xx'"):
        build_synonym_table(bad_lang, tokenizer, LANGUAGES)
    empty = pa.table({"word1": ["dog"], "lang1": ["en"], "word2": [""], "lang2": ["de"]})
    with pytest.raises(ValueError, match="row 0: empty word"):
        build_synonym_table(empty, tokenizer, LANGUAGES)


def test_dictionary_entry_ids_follow_the_sentence_language(table):
    # "house big chien" in English and in French: house is an English entry, chien a French one.
    ids = torch.tensor([[CLS, HOUSE, BIG, CHI, EN_, SEP, PAD]] * 2)
    words = torch.tensor([[-1, 0, 1, 2, 2, -1, -1]] * 2)
    entries = dictionary_entry_ids(ids, words, torch.tensor([EN, FR]), table)
    house, chien = table.entries[(EN, (HOUSE,))], table.entries[(FR, (CHI, EN_))]
    assert entries.tolist() == [[-1, house, -1, -1, -1, -1, -1], [-1, -1, -1, chien, chien, -1, -1]]
    with pytest.raises(ValueError, match="lang_ids"):
        dictionary_entry_ids(ids, words, torch.tensor([EN]), table)


# ------------------------------------------------------------------------------ synonyms spliced in
def tokens_of(ids, words, sentence_lang, table):
    """The ``dict_mlm_mask`` input of [B, T] ids and word ids (pad = PAD) in sentence languages [B]."""
    ids, words, sentence_lang = torch.tensor(ids), torch.tensor(words), torch.tensor(sentence_lang)
    return {
        "input_ids": ids,
        "attention_mask": (ids != PAD).long(),
        "word_ids": words,
        "entry_ids": dictionary_entry_ids(ids, words, sentence_lang, table),
        "lang_ids": sentence_lang[:, None].repeat(1, ids.shape[1]),
    }


def synonym_row(table, lang, word, synonym):
    """The ``table.synonym_ids`` row of ``synonym`` among the synonyms of (lang, word)."""
    entry = table.entries[(lang, word)]
    groups = table.group_offsets[entry], table.group_offsets[entry + 1]
    rows = range(table.synonym_offsets[groups[0]], table.synonym_offsets[groups[1]])
    return next(s for s in rows if tuple(t for t in table.synonym_ids[s].tolist() if t >= 0) == synonym)


def test_spliced_sequence_by_hand_for_a_longer_and_a_shorter_synonym(table):
    """English "cat big" -> Italian gatto (1 -> 2 subwords): the row grows by one; French "maison big" ->
    English house (2 -> 1): it shrinks by one and is re-padded; a full row that outgrows its width loses its
    last whole word, never its closing [SEP]."""
    tokens = tokens_of(
        [[CLS, CAT, BIG, SEP, PAD, PAD], [CLS, MA, ISON, BIG, SEP, PAD], [CLS, CAT, BIG, DOG, DOG, SEP]],
        [[-1, 0, 1, -1, -1, -1], [-1, 0, 0, 1, -1, -1], [-1, 0, 1, 2, 2, -1]],
        [EN, FR, EN],
        table,
    )
    gatto, house = synonym_row(table, EN, (CAT,), (GAT, TO)), synonym_row(table, FR, (MA, ISON), (HOUSE,))
    synonym = torch.tensor([[-1, gatto, -1, -1, -1, -1], [-1, house, house, -1, -1, -1], [-1, gatto, -1, -1, -1, -1]])
    out = splice_synonyms(
        {
            **{k: tokens[k] for k in ("input_ids", "attention_mask", "word_ids", "lang_ids")},
            "selected": torch.tensor([[0, 1, 0, 0, 0, 0], [0, 1, 1, 0, 0, 0], [0, 1, 0, 0, 0, 0]]),
        },
        synonym,
        table,
        {"input_ids": PAD, "word_ids": -1},
    )
    assert out["input_ids"].tolist() == [
        [CLS, GAT, TO, BIG, SEP, PAD],
        [CLS, HOUSE, BIG, SEP, PAD, PAD],
        [CLS, GAT, TO, BIG, SEP, PAD],
    ]
    assert out["attention_mask"].tolist() == [[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 0]]
    assert out["word_ids"].tolist() == [[-1, 0, 0, 1, -1, -1], [-1, 0, 1, -1, -1, -1], [-1, 0, 0, 1, -1, -1]]
    assert out["lang_ids"].tolist() == [[EN, IT, IT, EN, EN, EN], [FR, EN, FR, FR, FR, FR], [EN, IT, IT, EN, EN, EN]]
    assert out["selected"].tolist() == [[0, 1, 1, 0, 0, 0], [0, 1, 0, 0, 0, 0], [0, 1, 1, 0, 0, 0]]


@pytest.mark.parametrize(
    "lang, ids, words, synonym",
    [
        (EN, [CLS, CAT, BIG, SEP, PAD, PAD], [-1, 0, 1, -1, -1, -1], (GAT, TO)),  # longer synonym
        (FR, [CLS, MA, ISON, BIG, SEP, PAD], [-1, 0, 0, 1, -1, -1], (HOUSE,)),  # shorter synonym
    ],
)
def test_masked_batch_of_a_replaced_word_by_hand(table, lang, ids, words, synonym):
    """mask_prob 1 and x = 100 %: the dictionary word is selected and replaced; big (no entry) is not selected.
    ids, attention mask, labels and languages follow the spliced row; the word's positions hold <mask>s, random
    tokens or the synonym itself (the 80/10/10 of the next test)."""
    rows = 8
    tokens = tokens_of([ids] * rows, [words] * rows, [lang] * rows, table)
    out = dict_mlm_mask(tokens, table, MASK, len(VOCAB), 1.0, 1.0, "dictionary", PAD, RowRandom.for_batch(rows))
    n, target = len(synonym), LANG_OF_LABEL.get(synonym[0], IT if synonym == (GAT, TO) else EN)
    width = len(ids)
    labels = [-100, *synonym, -100, -100] + [-100] * (width - n - 3)
    assert out["labels"].tolist() == [labels] * rows
    assert out["label_lang_ids"].tolist() == [[-100, *[target] * n] + [-100] * (width - n - 1)] * rows
    assert out["lang_ids"].tolist() == [[lang, *[target] * n] + [lang] * (width - n - 1)] * rows
    assert out["attention_mask"].tolist() == [[1] * (n + 3) + [0] * (width - n - 3)] * rows
    assert (out["masked_ids"][:, [0, n + 1, n + 2]] == torch.tensor([CLS, BIG, SEP])).all()
    assert (out["masked_ids"][:, n + 3 :] == PAD).all()


def test_80_10_10_of_a_replaced_word_shows_the_synonym_never_the_word(table):
    """A replaced word is masked as the word of the code-switched sentence: 80 % <mask> on all the synonym's
    positions, 10 % random tokens, 10 % the synonym itself (BERT's "unchanged" = the label)."""
    rows = 4000
    tokens = tokens_of([[CLS, CAT, SEP, PAD]] * rows, [[-1, 0, -1, -1]] * rows, [EN] * rows, table)
    out = dict_mlm_mask(
        tokens,
        table,
        MASK,
        5000,
        1.0,
        1.0,
        "dictionary",
        PAD,  # random ids in [0, 5000)
        RowRandom.for_batch(rows, seed=11),
    )
    assert (out["labels"][:, 1:3] == torch.tensor([GAT, TO])).all()
    span = out["masked_ids"][:, 1:3]
    masked, shown = (span == MASK).all(1), (span == torch.tensor([GAT, TO])).all(1)
    assert (span[:, 0] == CAT).sum() < 5  # only a random draw can show cat (~0.08 expected)
    for share, expected in ((masked, 0.8), (shown, 0.1), (~masked & ~shown, 0.1)):
        assert abs(share.float().mean().item() - expected) < 0.02  # sd <= 0.0063


@pytest.mark.parametrize("percent", [50, 70, 90])
def test_dict_mlm_x_labels_a_synonym_x_percent_of_the_time(table, percent):
    """DICT-MLM-x (§2.3): the label is a cross-lingual synonym x% of the time, the word itself (100 - x)%."""
    rows = 12000
    tokens = tokens_of([[CLS, HOUSE, SEP, PAD]] * rows, [[-1, 0, -1, -1]] * rows, [EN] * rows, table)
    out = dict_mlm_mask(
        tokens, table, MASK, len(VOCAB), 1.0, percent / 100, "dictionary", PAD, RowRandom.for_batch(rows, seed=percent)
    )
    chosen = out["labels"][:, 1]
    share = {t: (chosen == t).float().mean().item() for t in (*LANG_OF_LABEL, MA)}
    replaced = percent / 100
    assert abs(share[HOUSE] - (1 - replaced)) < 0.02  # sd <= 0.0046
    # language first (1/3 each for de, it, fr), then synonym within fr (1/12 each, maison too); a uniform
    # draw over all six synonyms would give de 1/6 instead.
    for token, expected in (
        (HAUS, replaced / 3),
        (CASA, replaced / 3),
        (LOGIS, replaced / 12),
        (FOYER, replaced / 12),
        (DEMEURE, replaced / 12),
        (MA, replaced / 12),
    ):
        assert abs(share[token] - expected) < 0.012, (token, share[token], expected)
    assert sum(share.values()) == pytest.approx(1.0)
    # the target language is the label's language, at the input too; specials carry no label
    assert out["label_lang_ids"][:, 1].tolist() == [LANG_OF_LABEL.get(t, FR) for t in chosen.tolist()]
    assert torch.equal(out["lang_ids"][:, 1], out["label_lang_ids"][:, 1])
    maison = chosen == MA
    assert (out["labels"][maison, 2] == ISON).all() and (out["labels"][~maison, 2] == IGNORE_INDEX).all()
    assert (out["labels"][:, 0] == IGNORE_INDEX).all()
    with pytest.raises(ValueError, match="synonym_share"):
        dict_mlm_mask(tokens, table, MASK, len(VOCAB), 1.0, 1.5, "dictionary", PAD, RowRandom.for_batch(rows))


def test_pick_synonyms_marks_every_token_of_a_chosen_word(table):
    tokens = tokens_of([[CLS, CHI, EN_, BIG, SEP]], [[-1, 0, 0, 1, -1]], [FR], table)
    chosen = tokens["entry_ids"] >= 0
    uniforms = torch.full(chosen.shape, 0.0)
    synonym = pick_synonyms(tokens["entry_ids"], chosen, uniforms, uniforms, table)
    assert synonym[0, 1] == synonym[0, 2] >= 0 and (synonym[0, [0, 3, 4]] == -1).all()


# ------------------------------------------------------------------------------ dictionary-restricted masking
def random_words(rows, seed):
    """[CLS] words of 1-3 tokens (ids >= 30) [SEP] pad; ~40% of words eligible (entry id 0)."""
    rng = np.random.default_rng(seed)
    length = 32
    ids, words, entries = (np.full((rows, length), fill) for fill in (PAD, -1, -1))
    ids[:, 0] = CLS
    for row in range(rows):
        sizes = rng.integers(1, 4, size=length)
        n_words = int((np.cumsum(sizes) < length - 2).sum())
        word_of_token = np.repeat(np.arange(n_words), sizes[:n_words])
        end = 1 + len(word_of_token)
        words[row, 1:end] = word_of_token
        ids[row, 1:end] = rng.integers(30, 5000, size=end - 1)
        ids[row, end] = SEP
        eligible = rng.random(n_words) < 0.4
        entries[row, 1:end] = np.where(eligible[word_of_token], 0, -1)
    return torch.from_numpy(ids), torch.from_numpy(words), torch.from_numpy(entries)


def word_keys(words, where):
    """The distinct (row, word) pairs of the tokens where ``where`` holds."""
    rows = where.nonzero()[:, 0]
    return sorted(set(zip(rows.tolist(), words[where].tolist())))


def per_word_outcomes(ids, words, masked, labels):
    """{(row, word): outcome in mask/random/keep} for the selected words."""
    outcomes = {}
    for row, word in word_keys(words, labels != IGNORE_INDEX):
        span = words[row] == word
        assert (labels[row, span] == ids[row, span]).all(), "whole word, original labels"
        if (masked[row, span] == MASK).all():
            outcomes[(row, word)] = "mask"
        elif torch.equal(masked[row, span], ids[row, span]):
            outcomes[(row, word)] = "keep"
        else:
            outcomes[(row, word)] = "random"
    return outcomes


def dictionary_masking(table, ids, words, entries, random):
    """(masked ids, labels) of ``dict_mlm_mask`` with x = 0 (no synonym: the row keeps its layout)."""
    tokens = {
        "input_ids": ids,
        "attention_mask": (ids != PAD).long(),
        "word_ids": words,
        "entry_ids": entries,
        "lang_ids": torch.zeros_like(ids),
    }
    out = dict_mlm_mask(tokens, table, MASK, 5000, 0.15, 0.0, "dictionary", PAD, random)
    return out["masked_ids"], out["labels"]


def test_only_dictionary_words_are_masked_with_80_10_10(table):
    ids, words, entries = random_words(3000, seed=0)
    with_entry = (entries >= 0).any(1)  # a sentence without dictionary words falls back (test below)
    ids, words, entries = ids[with_entry], words[with_entry], entries[with_entry]
    masked, labels = dictionary_masking(table, ids, words, entries, RowRandom.for_batch(len(ids), seed=1))
    selected = labels != IGNORE_INDEX
    assert (entries[selected] >= 0).all(), "a word without a dictionary entry was masked"
    assert torch.equal(masked[~selected], ids[~selected])
    outcomes = per_word_outcomes(ids, words, masked, labels)
    eligible_words = len(word_keys(words, entries >= 0))
    assert abs(len(outcomes) / eligible_words - 0.15) < 0.01  # sd ~ 0.002 over ~17k eligible words
    total = len(outcomes)
    for kind, expected in (("mask", 0.8), ("random", 0.1), ("keep", 0.1)):
        share = sum(v == kind for v in outcomes.values()) / total
        assert abs(share - expected) < 0.025, (kind, share)  # sd <= 0.0075 over ~2.5k words


def test_sentences_without_dictionary_words_fall_back_to_plain_whole_word_masking(table):
    ids, words, _ = random_words(8, seed=2)
    no_entries = torch.full_like(words, -1)
    ours = dictionary_masking(table, ids, words, no_entries, RowRandom.for_batch(len(ids), seed=3))
    plain = whole_word_mask(ids, words, MASK, 5000, 0.15, RowRandom.for_batch(len(ids), seed=3))
    assert torch.equal(ours[0], plain[0]) and torch.equal(ours[1], plain[1])
    assert (ours[1] != IGNORE_INDEX).any()


# ------------------------------------------------------------------------------ dict-TLM
def test_code_switched_concatenation_by_hand(table):
    """Each switched word takes all its synonym's subwords: en "cat big" -> gatto (longer half), fr "maison big"
    -> house (shorter half); en "cat cat big" does not fit 8 with both halves and is cut to its first word."""
    ids = torch.tensor([[CLS, CAT, BIG, SEP, PAD], [CLS, MA, ISON, BIG, SEP], [CLS, CAT, CAT, BIG, SEP]])
    words = torch.tensor([[-1, 0, 1, -1, -1], [-1, 0, 0, 1, -1], [-1, 0, 1, 2, -1]])
    sentence_lang = torch.tensor([EN, FR, EN])
    entries = dictionary_entry_ids(ids, words, sentence_lang, table)
    out = code_switch_concat(
        ids,
        words,
        entries,
        sentence_lang,
        table,
        cls_id=CLS,
        sep_id=SEP,
        pad_id=PAD,
        max_length=8,
        switch_prob=1.0,
        random=RowRandom.for_batch(3),
    )
    cat, gatto = table.entries[(EN, (CAT,))], table.entries[(IT, (GAT, TO))]
    maison, house = table.entries[(FR, (MA, ISON))], table.entries[(EN, (HOUSE,))]
    assert out["input_ids"].tolist() == [
        [CLS, CAT, BIG, SEP, GAT, TO, BIG, SEP],
        [CLS, MA, ISON, BIG, SEP, HOUSE, BIG, SEP],
        [CLS, CAT, SEP, GAT, TO, SEP, PAD, PAD],
    ]
    assert out["attention_mask"].tolist() == [[1] * 8, [1] * 8, [1] * 6 + [0] * 2]
    assert out["word_ids"].tolist() == [
        [-1, 0, 1, -1, 2, 2, 3, -1],
        [-1, 0, 0, 1, -1, 2, 3, -1],
        [-1, 0, -1, 1, 1, -1, -1, -1],
    ]
    assert out["entry_ids"].tolist() == [
        [-1, cat, -1, -1, gatto, gatto, -1, -1],
        [-1, maison, maison, -1, -1, house, -1, -1],
        [-1, cat, -1, gatto, gatto, -1, -1, -1],
    ]
    assert out["lang_ids"].tolist() == [
        [EN, EN, EN, EN, IT, IT, EN, EN],
        [FR, FR, FR, FR, FR, EN, FR, FR],
        [EN, EN, EN, IT, IT, EN, EN, EN],
    ]
    # switch_prob 0: the second half is the original again
    same = code_switch_concat(
        ids,
        words,
        entries,
        sentence_lang,
        table,
        cls_id=CLS,
        sep_id=SEP,
        pad_id=PAD,
        max_length=8,
        switch_prob=0.0,
        random=RowRandom.for_batch(3),
    )
    assert same["input_ids"][0].tolist() == [CLS, CAT, BIG, SEP, CAT, BIG, SEP, PAD]
    with pytest.raises(ValueError, match="max_length"):
        code_switch_concat(
            ids,
            words,
            entries,
            sentence_lang,
            table,
            cls_id=CLS,
            sep_id=SEP,
            pad_id=PAD,
            max_length=2,
            switch_prob=0.5,
            random=RowRandom.for_batch(3),
        )


def test_code_switch_rate(table):
    rows = 2500
    ids = torch.tensor([[CLS, DOG, SEP]] * rows)
    words = torch.tensor([[-1, 0, -1]] * rows)
    langs = torch.full((rows,), EN)
    entries = dictionary_entry_ids(ids, words, langs, table)
    out = code_switch_concat(
        ids,
        words,
        entries,
        langs,
        table,
        cls_id=CLS,
        sep_id=SEP,
        pad_id=PAD,
        max_length=6,
        switch_prob=0.3,
        random=RowRandom.for_batch(rows, seed=4),
    )
    switched = out["input_ids"][:, 3]  # [CLS] dog [SEP] switched [SEP] pad (chien: chi ##en)
    assert abs((switched != DOG).float().mean().item() - 0.3) < 0.03  # sd 0.009
    assert set(switched.tolist()) == {DOG, HUND, CHI}


# ------------------------------------------------------------------------------ collate step and loss
def corpus_batch():
    return {
        "input_ids": torch.tensor([[CLS, HOUSE, BIG, DOG, SEP, PAD], [CLS, CHI, EN_, BIG, SEP, PAD]]),
        "attention_mask": torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 0]]),
        "word_ids": torch.tensor([[-1, 0, 1, 2, -1, -1], [-1, 0, 0, 1, -1, -1]]),
        "lang_id": torch.tensor([EN, FR]),
    }


@pytest.mark.parametrize("tlm", [False, True])
def test_data_side_preparation_masks_dictionary_words_deterministically(table, tlm):
    masking = DictMLMMasking(
        mask_token_id=MASK,
        vocab_size=len(VOCAB),
        cls_id=CLS,
        sep_id=SEP,
        pad_id=PAD,
        mask_prob=0.5,
        synonym_share=0.5,
        tlm=tlm,
        max_length=12,
    )
    first = mask_dict_mlm_batch(corpus_batch(), table, masking, RowRandom.for_batch(2, seed=5))
    again = mask_dict_mlm_batch(corpus_batch(), table, masking, RowRandom.for_batch(2, seed=5))
    assert set(first) == {"masked_ids", "labels", "label_lang_ids", "lang_ids", "attention_mask", "word_ids"}
    assert all(torch.equal(first[k], again[k]) for k in first)
    width = 12 if tlm else 6
    assert all(v.shape == (2, width) for v in first.values())
    labelled = first["labels"] != IGNORE_INDEX
    assert labelled.any()
    assert torch.equal(labelled, first["label_lang_ids"] != IGNORE_INDEX)
    if not tlm:  # BIG has no entry in either language: DICT-MLM never masks it
        assert not (first["labels"] == BIG).any()


def test_dict_tlm_masks_any_word_of_the_concatenation_with_plain_labels(table):
    """dict-TLM (§2.3): as TLM, 15% of the concatenation's words masked, each label the token at its position."""
    masking = DictMLMMasking(
        mask_token_id=MASK,
        vocab_size=len(VOCAB),
        cls_id=CLS,
        sep_id=SEP,
        pad_id=PAD,
        mask_prob=0.15,
        synonym_share=1.0,
        tlm=True,
        switch_prob=1.0,
        max_length=12,
    )
    rows = 400
    corpus = {k: v.repeat(rows // 2, *([1] * (v.dim() - 1))) for k, v in corpus_batch().items()}
    out = mask_dict_mlm_batch(corpus, table, masking, RowRandom.for_batch(rows, seed=7))
    entries = dictionary_entry_ids(corpus["input_ids"], corpus["word_ids"], corpus["lang_id"], table)
    unmasked = code_switch_concat(
        corpus["input_ids"],
        corpus["word_ids"],
        entries,
        corpus["lang_id"],
        table,
        cls_id=CLS,
        sep_id=SEP,
        pad_id=PAD,
        max_length=12,
        switch_prob=1.0,
        random=RowRandom.for_batch(rows, seed=7),
    )
    labelled = out["labels"] != IGNORE_INDEX
    assert torch.equal(out["labels"][labelled], unmasked["input_ids"][labelled])  # never a synonym label
    assert torch.equal(out["label_lang_ids"][labelled], unmasked["lang_ids"][labelled])
    assert (out["labels"] == BIG).any()  # words without a dictionary entry are masked too
    words = int((unmasked["word_ids"] >= 0).sum())
    assert 0.09 < int(labelled.sum()) / words < 0.21  # ~15% of the tokens (whole words)


def test_empty_dictionary_gives_plain_masking_and_original_labels(tokenizer):
    same_language_only = pa.table({"word1": ["house"], "lang1": ["en"], "word2": ["home"], "lang2": ["en"]})
    empty = build_synonym_table(same_language_only, tokenizer, LANGUAGES)
    assert empty.entries == {} and empty.synonym_ids.shape == (0, 0)
    masking = DictMLMMasking(
        mask_token_id=MASK, vocab_size=len(VOCAB), cls_id=CLS, sep_id=SEP, pad_id=PAD, mask_prob=0.5, synonym_share=1.0
    )
    out = mask_dict_mlm_batch(corpus_batch(), empty, masking, RowRandom.for_batch(2, seed=6))
    labelled = out["labels"] != IGNORE_INDEX
    assert labelled.any()
    assert torch.equal(out["labels"][labelled], corpus_batch()["input_ids"][labelled])
    assert torch.equal(out["label_lang_ids"][labelled], out["lang_ids"][labelled])


def tiny_model():
    torch.manual_seed(0)
    config = XLMRobertaConfig(
        vocab_size=len(VOCAB),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=40,
        pad_token_id=PAD,
    )
    return XLMRobertaForMaskedLM(config).eval()


def masked_example():
    return {
        "masked_ids": torch.tensor([[CLS, MASK, BIG, DOG, SEP, PAD], [CLS, MASK, MASK, BIG, SEP, PAD]]),
        "attention_mask": torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 0]]),
        "lang_ids": torch.tensor([[EN] * 6, [FR] * 6]),
        "labels": torch.tensor([[-100, HAUS, -100, DOG, -100, -100], [-100, CA, NE, -100, -100, -100]]),
        "label_lang_ids": torch.tensor([[-100, DE, -100, EN, -100, -100], [-100, IT, IT, -100, -100, -100]]),
    }


@pytest.mark.parametrize("coupled", [True, False])
def test_loss_equals_cross_entropy_computed_by_hand(coupled):
    masked_lm = tiny_model()
    objective = DictMLMObjective.for_model(masked_lm, num_languages=len(LANGUAGES), coupled=coupled)
    torch.nn.init.normal_(objective.language_embeddings.embedding.weight)  # non-trivial languages
    torch.nn.init.normal_(objective.head.dense.weight, std=0.1)
    model = TrainingModule(masked_lm, {"dict_mlm": objective}, {"dict_mlm": 1.0})
    batch = masked_example()
    loss = model({"corpus": batch})["dict_mlm"]

    # Independent computation: embeddings by hand, XLM-R positions by hand, head with raw weights,
    # full [B, T, V] logits and cross-entropy with ignore_index.
    ids = batch["masked_ids"]
    embeds = (
        masked_lm.roberta.embeddings.word_embeddings.weight[ids]
        + objective.language_embeddings.embedding.weight[batch["lang_ids"]]
    )
    not_pad = (ids != PAD).long()
    positions = torch.cumsum(not_pad, 1) * not_pad + PAD
    states = masked_lm.roberta(
        inputs_embeds=embeds, position_ids=positions, attention_mask=batch["attention_mask"]
    ).last_hidden_state
    head, decoder = objective.head, masked_lm.lm_head.decoder
    # coupled (the paper's setup): the head's language vectors are the input's
    table = objective.language_embeddings.embedding if coupled else head.target_language
    assert (head.target_language is None) == coupled
    x = torch.cat([states, table.weight[batch["label_lang_ids"].clamp(min=0)]], -1)
    x = F.layer_norm(
        F.gelu(x @ head.dense.weight.T + head.dense.bias),
        (16,),
        head.layer_norm.weight,
        head.layer_norm.bias,
        head.layer_norm.eps,
    )
    logits = x @ decoder.weight.T + decoder.bias
    expected = F.cross_entropy(logits.view(-1, len(VOCAB)), batch["labels"].view(-1), ignore_index=IGNORE_INDEX)
    torch.testing.assert_close(loss, expected)


def test_objective_starts_as_plain_mlm_and_trains_its_language_parameters():
    masked_lm = tiny_model()
    objective = DictMLMObjective.for_model(masked_lm, num_languages=len(LANGUAGES))
    batch = masked_example()
    plain = masked_lm(
        input_ids=batch["masked_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"]
    ).loss
    loss = objective(Encoder(masked_lm), batch)
    torch.testing.assert_close(loss, plain)  # zero-init languages + copied head = the plain MLM loss
    loss.backward()
    table = objective.language_embeddings.embedding.weight
    assert (table.grad[[EN, FR]].abs().sum(1) > 0).all()  # the coupled table learns through the input first
    assert masked_lm.get_input_embeddings().weight.grad is not None
    # one step later the (shared) language vectors are non-zero and the head's language columns learn too
    torch.optim.SGD(objective.parameters(), lr=1.0).step()
    objective.zero_grad()
    objective(Encoder(masked_lm), batch).backward()
    assert objective.head.dense.weight.grad[:, 16:].abs().sum() > 0


def test_align_mlm_s_rerun_masks_every_word_and_replaces_labels_of_dictionary_words_only(table):
    """ALIGN-MLM App. G.4 (mask_words="all"): mBERT's masking over every word; a masked word with an entry takes
    a synonym label x% of the time, any other keeps its own."""
    rows = 400
    corpus = {k: v.repeat(rows // 2, *([1] * (v.dim() - 1))) for k, v in corpus_batch().items()}
    masking = DictMLMMasking(
        mask_token_id=MASK,
        vocab_size=len(VOCAB),
        cls_id=CLS,
        sep_id=SEP,
        pad_id=PAD,
        mask_prob=0.15,
        synonym_share=1.0,
        mask_words="all",
    )
    out = mask_dict_mlm_batch(corpus, table, masking, RowRandom.for_batch(rows, seed=9))
    # a word without an entry (big, one per row) is masked as often as any and keeps its label
    assert 0.08 < (out["labels"] == BIG).sum() / rows < 0.22
    # a masked word with an entry always takes a synonym (x = 100 %): English house never labels itself, and
    # the labels of the rows' first words are the synonyms' first subwords (splicing keeps the word at 1)
    assert not (out["labels"] == HOUSE).any()
    first = out["labels"][:, 1][out["labels"][:, 1] != IGNORE_INDEX]
    assert first.numel() and set(first.tolist()) <= {HAUS, CASA, LOGIS, FOYER, DEMEURE, MA, CA, DOG}
    dictionary_only = mask_dict_mlm_batch(
        corpus, table, dataclasses.replace(masking, mask_words="dictionary"), RowRandom.for_batch(rows, seed=9)
    )
    assert not (dictionary_only["labels"] == BIG).any()  # §2.2: BIG is never masked


def test_without_the_conditioned_head_the_loss_is_the_model_s_own_mlm_head_on_language_embedded_inputs():
    """ALIGN-MLM's re-run (App. G.4, conditioned_head=false): language ids still at the input, no conditioning."""
    masked_lm = tiny_model()
    objective = DictMLMObjective.for_model(masked_lm, num_languages=len(LANGUAGES), conditioned_head=False)
    assert objective.head is None
    torch.nn.init.normal_(objective.language_embeddings.embedding.weight)
    batch = masked_example()
    loss = objective(Encoder(masked_lm), batch)
    ids = batch["masked_ids"]
    embeds = (
        masked_lm.roberta.embeddings.word_embeddings.weight[ids]
        + objective.language_embeddings.embedding.weight[batch["lang_ids"]]
    )
    not_pad = (ids != PAD).long()
    states = masked_lm.roberta(
        inputs_embeds=embeds,
        position_ids=torch.cumsum(not_pad, 1) * not_pad + PAD,
        attention_mask=batch["attention_mask"],
    ).last_hidden_state
    logits = masked_lm.lm_head(states)
    expected = F.cross_entropy(logits.view(-1, len(VOCAB)), batch["labels"].view(-1), ignore_index=IGNORE_INDEX)
    torch.testing.assert_close(loss, expected)
    plain = masked_lm(input_ids=ids, attention_mask=batch["attention_mask"], labels=batch["labels"]).loss
    assert not torch.allclose(loss, plain)  # the language embeddings do reach the input
