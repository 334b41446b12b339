"""DICT-MLM: synonym table, dictionary-restricted masking, label replacement, dict-TLM layout, loss."""

import dataclasses

import numpy as np
import pyarrow as pa
import pytest
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, XLMRobertaConfig, XLMRobertaForMaskedLM

from distalign.train.module import TrainingModule
from distalign.data.row_random import RowRandom
from distalign.models.encoder import Encoder
from distalign.objectives.dict_mlm import (
    DictMLMMasking,
    DictMLMObjective,
    build_synonym_table,
    code_switch_concat,
    dict_whole_word_mask,
    dictionary_entry_ids,
    mask_dict_mlm_batch,
    replace_labels,
)
from distalign.objectives.mlm import IGNORE_INDEX, whole_word_mask

PAD, UNK, CLS, SEP, MASK = range(5)
# Hand-made WordPiece vocabulary: maison = ma ##ison, chien = chi ##en, cane = ca ##ne.
VOCAB = {t: i for i, t in enumerate(
    ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "house", "haus", "ma", "##ison", "casa", "logis", "foyer",
     "demeure", "dog", "hund", "chi", "##en", "ca", "##ne", "big", "home"])}
HOUSE, HAUS, MA, ISON, CASA, LOGIS, FOYER, DEMEURE, DOG, HUND, CHI, EN_, CA, NE, BIG = range(5, 20)
LANGUAGES = ["en", "de", "fr", "it"]
EN, DE, FR, IT = range(4)
LANG_OF_LABEL = {HOUSE: EN, HAUS: DE, CASA: IT, LOGIS: FR, FOYER: FR, DEMEURE: FR}
PAIRS = [
    ("house", "en", "haus", "de"),
    ("house", "en", "maison", "fr"),  # 1 vs 2 subwords: dropped
    ("house", "en", "casa", "it"),
    ("house", "en", "logis", "fr"),
    ("house", "en", "foyer", "fr"),
    ("house", "en", "demeure", "fr"),
    ("dog", "en", "hund", "de"),
    ("dog", "en", "chien", "fr"),  # 1 vs 2 subwords: dropped
    ("chien", "fr", "cane", "it"),
    ("house", "en", "home", "en"),  # same language: dropped
    ("dog house", "en", "hundehaus", "de"),  # multi-word: dropped
]


@pytest.fixture(scope="module")
def tokenizer():
    wordpiece = Tokenizer(models.WordPiece(VOCAB, unk_token="[UNK]"))
    wordpiece.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=wordpiece, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")


@pytest.fixture(scope="module")
def table(tokenizer):
    columns = list(zip(*PAIRS))
    dictionary = pa.table({name: list(col) for name, col in zip(["word1", "lang1", "word2", "lang2"], columns)})
    return build_synonym_table(dictionary, tokenizer, LANGUAGES)


def synonyms_of(table, entry):
    """{target language: {synonym token ids}} of an entry, read back from the offset tensors."""
    out = {}
    for g in range(table.group_offsets[entry], table.group_offsets[entry + 1]):
        rows = table.synonym_ids[table.synonym_offsets[g]:table.synonym_offsets[g + 1]]
        out[int(table.group_lang[g])] = {tuple(t for t in row.tolist() if t >= 0) for row in rows}
    return out


# ------------------------------------------------------------------------------ synonym table
def test_synonym_table_by_hand(table):
    expected = {
        (EN, (HOUSE,)): {DE: {(HAUS,)}, IT: {(CASA,)}, FR: {(LOGIS,), (FOYER,), (DEMEURE,)}},
        (DE, (HAUS,)): {EN: {(HOUSE,)}}, (IT, (CASA,)): {EN: {(HOUSE,)}},
        (FR, (LOGIS,)): {EN: {(HOUSE,)}}, (FR, (FOYER,)): {EN: {(HOUSE,)}}, (FR, (DEMEURE,)): {EN: {(HOUSE,)}},
        (EN, (DOG,)): {DE: {(HUND,)}}, (DE, (HUND,)): {EN: {(DOG,)}},
        (FR, (CHI, EN_)): {IT: {(CA, NE)}}, (IT, (CA, NE)): {FR: {(CHI, EN_)}},
    }
    assert {key: synonyms_of(table, e) for key, e in table.entries.items()} == expected
    assert table.dropped == {"length_mismatch": 2, "same_language": 1, "multiword": 1}
    # each synonym's own entry is the (its language, its tokens) key
    for key, e in table.entries.items():
        for g in range(table.group_offsets[e], table.group_offsets[e + 1]):
            for s in range(table.synonym_offsets[g], table.synonym_offsets[g + 1]):
                own = (int(table.group_lang[g]), tuple(t for t in table.synonym_ids[s].tolist() if t >= 0))
                assert table.entries[own] == table.synonym_entry[s]


def test_bad_dictionary_raises_value_errors(tokenizer):
    with pytest.raises(ValueError, match="missing column"):
        build_synonym_table(pa.table({"word1": ["a"], "lang1": ["en"], "word2": ["b"]}), tokenizer, LANGUAGES)
    bad_lang = pa.table({"word1": ["dog", "dog"], "lang1": ["en", "en"], "word2": ["hund", "hund"],
                         "lang2": ["de", "xx"]})
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


# ------------------------------------------------------------------------------ label replacement
def single_word_batch(table, rows, word, lang):
    ids = torch.tensor([[CLS, *word, SEP]] * rows)
    words = torch.tensor([[-1] + [0] * len(word) + [-1]] * rows)
    labels = torch.where(words >= 0, ids, IGNORE_INDEX)
    entries = dictionary_entry_ids(ids[:1], words[:1], torch.tensor([lang]), table).repeat(rows, 1)
    return labels, words, entries, torch.full_like(ids, lang)


@pytest.mark.parametrize("percent", [50, 70, 90])
def test_dict_mlm_x_labels_a_synonym_x_percent_of_the_time(table, percent):
    """DICT-MLM-x (§2.3): the label is a cross-lingual synonym x% of the time, the word itself (100 - x)%."""
    rows = 12000
    labels, words, entries, langs = single_word_batch(table, rows, [HOUSE], EN)
    random = RowRandom.for_batch(rows, seed=percent)
    new_labels, label_langs = replace_labels(labels, words, entries, langs, table, percent / 100, random)
    chosen = new_labels[:, 1]
    share = {t: (chosen == t).float().mean().item() for t in LANG_OF_LABEL}
    replaced = percent / 100
    assert abs(share[HOUSE] - (1 - replaced)) < 0.02  # sd <= 0.0046
    # language first (1/3 each for de, it, fr), then synonym within fr (1/9 each); a uniform draw over
    # all five synonyms would give de 1/5 instead.
    for token, expected in ((HAUS, replaced / 3), (CASA, replaced / 3),
                            (LOGIS, replaced / 9), (FOYER, replaced / 9), (DEMEURE, replaced / 9)):
        assert abs(share[token] - expected) < 0.012, (token, share[token], expected)
    assert sum(share.values()) == pytest.approx(1.0)
    # the target language is the label's language; specials carry no label and no language
    assert label_langs[:, 1].tolist() == [LANG_OF_LABEL[t] for t in chosen.tolist()]
    assert (new_labels[:, [0, 2]] == IGNORE_INDEX).all() and (label_langs[:, [0, 2]] == IGNORE_INDEX).all()


def test_multi_subword_word_takes_the_whole_synonym_and_its_language(table):
    # French "[CLS] chien big [SEP]": chien (2 subwords) -> cane (2 subwords, Italian); big has no entry.
    ids = torch.tensor([[CLS, CHI, EN_, BIG, SEP]])
    words = torch.tensor([[-1, 0, 0, 1, -1]])
    labels = torch.where(words >= 0, ids, IGNORE_INDEX)
    entries = dictionary_entry_ids(ids, words, torch.tensor([FR]), table)
    langs = torch.full_like(ids, FR)
    new_labels, label_langs = replace_labels(labels, words, entries, langs, table, synonym_share=1.0,
                                             random=RowRandom.for_batch(1))
    assert new_labels.tolist() == [[IGNORE_INDEX, CA, NE, BIG, IGNORE_INDEX]]
    assert label_langs.tolist() == [[IGNORE_INDEX, IT, IT, FR, IGNORE_INDEX]]
    kept, kept_langs = replace_labels(labels, words, entries, langs, table, synonym_share=0.0,
                                      random=RowRandom.for_batch(1))
    assert torch.equal(kept, labels) and kept_langs.tolist() == [[IGNORE_INDEX, FR, FR, FR, IGNORE_INDEX]]
    # unlabelled words are never replaced
    unlabelled = labels.clone()
    unlabelled[0, 1:3] = IGNORE_INDEX
    always = replace_labels(unlabelled, words, entries, langs, table, 1.0, RowRandom.for_batch(1))
    assert torch.equal(always[0], unlabelled)
    with pytest.raises(ValueError, match="synonym_share"):
        replace_labels(labels, words, entries, langs, table, synonym_share=1.5, random=RowRandom.for_batch(1))


def test_entry_ids_that_do_not_match_the_spans_raise(table):
    ids = torch.tensor([[CLS, CHI, EN_, SEP]])
    words = torch.tensor([[-1, 0, 0, -1]])
    one_token_entry = table.entries[(EN, (DOG,))]  # a 1-token synonym for a 2-token word
    entries = torch.tensor([[-1, one_token_entry, one_token_entry, -1]])
    with pytest.raises(ValueError, match="entry_ids do not match"):
        replace_labels(torch.where(words >= 0, ids, IGNORE_INDEX), words, entries, torch.zeros_like(ids), table, 1.0,
                       RowRandom.for_batch(len(ids)))


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


def test_only_dictionary_words_are_masked_with_80_10_10():
    ids, words, entries = random_words(3000, seed=0)
    with_entry = (entries >= 0).any(1)  # a sentence without dictionary words falls back (test below)
    ids, words, entries = ids[with_entry], words[with_entry], entries[with_entry]
    masked, labels = dict_whole_word_mask(ids, words, entries, MASK, 5000, 0.15,
                                          RowRandom.for_batch(len(ids), seed=1))
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


def test_sentences_without_dictionary_words_fall_back_to_plain_whole_word_masking():
    ids, words, _ = random_words(8, seed=2)
    no_entries = torch.full_like(words, -1)
    ours = dict_whole_word_mask(ids, words, no_entries, MASK, 5000, 0.15, RowRandom.for_batch(len(ids), seed=3))
    plain = whole_word_mask(ids, words, MASK, 5000, 0.15, RowRandom.for_batch(len(ids), seed=3))
    assert torch.equal(ours[0], plain[0]) and torch.equal(ours[1], plain[1])
    assert (ours[1] != IGNORE_INDEX).any()


# ------------------------------------------------------------------------------ dict-TLM
def test_code_switched_concatenation_by_hand(table):
    # row 0 (en): [CLS] dog big [SEP]; row 1 (fr): [CLS] chien big [SEP] -> cut to "chien" by max_length 8.
    ids = torch.tensor([[CLS, DOG, BIG, SEP, PAD], [CLS, CHI, EN_, BIG, SEP]])
    words = torch.tensor([[-1, 0, 1, -1, -1], [-1, 0, 0, 1, -1]])
    sentence_lang = torch.tensor([EN, FR])
    entries = dictionary_entry_ids(ids, words, sentence_lang, table)
    out = code_switch_concat(ids, words, entries, sentence_lang, table, cls_id=CLS, sep_id=SEP, pad_id=PAD,
                             max_length=8, switch_prob=1.0, random=RowRandom.for_batch(2))
    dog, hund = table.entries[(EN, (DOG,))], table.entries[(DE, (HUND,))]
    chien, cane = table.entries[(FR, (CHI, EN_))], table.entries[(IT, (CA, NE))]
    assert out["input_ids"].tolist() == [[CLS, DOG, BIG, SEP, HUND, BIG, SEP, PAD],
                                         [CLS, CHI, EN_, SEP, CA, NE, SEP, PAD]]
    assert out["attention_mask"].tolist() == [[1] * 7 + [0], [1] * 7 + [0]]
    assert out["word_ids"].tolist() == [[-1, 0, 1, -1, 2, 3, -1, -1], [-1, 0, 0, -1, 1, 1, -1, -1]]
    assert out["entry_ids"].tolist() == [[-1, dog, -1, -1, hund, -1, -1, -1],
                                         [-1, chien, chien, -1, cane, cane, -1, -1]]
    assert out["lang_ids"].tolist() == [[EN, EN, EN, EN, DE, EN, EN, EN], [FR, FR, FR, FR, IT, IT, FR, FR]]
    # switch_prob 0: the second half is the original again
    same = code_switch_concat(ids, words, entries, sentence_lang, table, cls_id=CLS, sep_id=SEP, pad_id=PAD,
                              max_length=8, switch_prob=0.0, random=RowRandom.for_batch(2))
    assert same["input_ids"][0].tolist() == [CLS, DOG, BIG, SEP, DOG, BIG, SEP, PAD]
    with pytest.raises(ValueError, match="max_length"):
        code_switch_concat(ids, words, entries, sentence_lang, table, cls_id=CLS, sep_id=SEP, pad_id=PAD,
                           max_length=2, switch_prob=0.5, random=RowRandom.for_batch(2))


def test_code_switch_rate(table):
    rows = 2500
    ids = torch.tensor([[CLS, DOG, SEP]] * rows)
    words = torch.tensor([[-1, 0, -1]] * rows)
    langs = torch.full((rows,), EN)
    entries = dictionary_entry_ids(ids, words, langs, table)
    out = code_switch_concat(ids, words, entries, langs, table, cls_id=CLS, sep_id=SEP, pad_id=PAD,
                             max_length=6, switch_prob=0.3, random=RowRandom.for_batch(rows, seed=4))
    switched = out["input_ids"][:, 3]  # [CLS] dog [SEP] switched [SEP] pad
    assert abs((switched == HUND).float().mean().item() - 0.3) < 0.03  # sd 0.009
    assert set(switched.tolist()) == {DOG, HUND}


# ------------------------------------------------------------------------------ collate step and loss
def corpus_batch():
    return {"input_ids": torch.tensor([[CLS, HOUSE, BIG, DOG, SEP, PAD], [CLS, CHI, EN_, BIG, SEP, PAD]]),
            "attention_mask": torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 0]]),
            "word_ids": torch.tensor([[-1, 0, 1, 2, -1, -1], [-1, 0, 0, 1, -1, -1]]),
            "lang_id": torch.tensor([EN, FR])}


@pytest.mark.parametrize("tlm", [False, True])
def test_data_side_preparation_masks_dictionary_words_deterministically(table, tlm):
    masking = DictMLMMasking(mask_token_id=MASK, vocab_size=len(VOCAB), cls_id=CLS, sep_id=SEP, pad_id=PAD,
                             mask_prob=0.5, synonym_share=0.5, tlm=tlm, max_length=12)
    first = mask_dict_mlm_batch(corpus_batch(), table, masking, RowRandom.for_batch(2, seed=5))
    again = mask_dict_mlm_batch(corpus_batch(), table, masking, RowRandom.for_batch(2, seed=5))
    assert set(first) == {"masked_ids", "labels", "label_lang_ids", "lang_ids", "attention_mask"}
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
    masking = DictMLMMasking(mask_token_id=MASK, vocab_size=len(VOCAB), cls_id=CLS, sep_id=SEP, pad_id=PAD,
                             mask_prob=0.15, synonym_share=1.0, tlm=True, switch_prob=1.0, max_length=12)
    rows = 400
    corpus = {k: v.repeat(rows // 2, *([1] * (v.dim() - 1))) for k, v in corpus_batch().items()}
    out = mask_dict_mlm_batch(corpus, table, masking, RowRandom.for_batch(rows, seed=7))
    entries = dictionary_entry_ids(corpus["input_ids"], corpus["word_ids"], corpus["lang_id"], table)
    unmasked = code_switch_concat(corpus["input_ids"], corpus["word_ids"], entries, corpus["lang_id"], table,
                                  cls_id=CLS, sep_id=SEP, pad_id=PAD, max_length=12, switch_prob=1.0,
                                  random=RowRandom.for_batch(rows, seed=7))
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
    masking = DictMLMMasking(mask_token_id=MASK, vocab_size=len(VOCAB), cls_id=CLS, sep_id=SEP, pad_id=PAD,
                             mask_prob=0.5, synonym_share=1.0)
    out = mask_dict_mlm_batch(corpus_batch(), empty, masking, RowRandom.for_batch(2, seed=6))
    labelled = out["labels"] != IGNORE_INDEX
    assert labelled.any()
    assert torch.equal(out["labels"][labelled], corpus_batch()["input_ids"][labelled])
    assert torch.equal(out["label_lang_ids"][labelled], out["lang_ids"][labelled])


def tiny_model():
    torch.manual_seed(0)
    config = XLMRobertaConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                              intermediate_size=32, max_position_embeddings=40, pad_token_id=PAD)
    return XLMRobertaForMaskedLM(config).eval()


def masked_example():
    return {"masked_ids": torch.tensor([[CLS, MASK, BIG, DOG, SEP, PAD], [CLS, MASK, MASK, BIG, SEP, PAD]]),
            "attention_mask": torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 0]]),
            "lang_ids": torch.tensor([[EN] * 6, [FR] * 6]),
            "labels": torch.tensor([[-100, HAUS, -100, DOG, -100, -100], [-100, CA, NE, -100, -100, -100]]),
            "label_lang_ids": torch.tensor([[-100, DE, -100, EN, -100, -100], [-100, IT, IT, -100, -100, -100]])}


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
    embeds = (masked_lm.roberta.embeddings.word_embeddings.weight[ids]
              + objective.language_embeddings.embedding.weight[batch["lang_ids"]])
    not_pad = (ids != PAD).long()
    positions = torch.cumsum(not_pad, 1) * not_pad + PAD
    states = masked_lm.roberta(inputs_embeds=embeds, position_ids=positions,
                               attention_mask=batch["attention_mask"]).last_hidden_state
    head, decoder = objective.head, masked_lm.lm_head.decoder
    # coupled (the paper's setup): the head's language vectors are the input's
    table = objective.language_embeddings.embedding if coupled else head.target_language
    assert (head.target_language is None) == coupled
    x = torch.cat([states, table.weight[batch["label_lang_ids"].clamp(min=0)]], -1)
    x = F.layer_norm(F.gelu(x @ head.dense.weight.T + head.dense.bias), (16,), head.layer_norm.weight,
                     head.layer_norm.bias, head.layer_norm.eps)
    logits = x @ decoder.weight.T + decoder.bias
    expected = F.cross_entropy(logits.view(-1, len(VOCAB)), batch["labels"].view(-1), ignore_index=IGNORE_INDEX)
    torch.testing.assert_close(loss, expected)


def test_objective_starts_as_plain_mlm_and_trains_its_language_parameters():
    masked_lm = tiny_model()
    objective = DictMLMObjective.for_model(masked_lm, num_languages=len(LANGUAGES))
    batch = masked_example()
    plain = masked_lm(input_ids=batch["masked_ids"], attention_mask=batch["attention_mask"],
                      labels=batch["labels"]).loss
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
    masking = DictMLMMasking(mask_token_id=MASK, vocab_size=len(VOCAB), cls_id=CLS, sep_id=SEP, pad_id=PAD,
                             mask_prob=0.15, synonym_share=1.0, mask_words="all")
    out = mask_dict_mlm_batch(corpus, table, masking, RowRandom.for_batch(rows, seed=9))
    labelled = out["labels"] != IGNORE_INDEX
    big = corpus["input_ids"] == BIG
    assert 0.08 < (labelled & big).sum() / big.sum() < 0.22  # a word without an entry is masked as often as any
    assert torch.equal(out["labels"][labelled & big], corpus["input_ids"][labelled & big])  # ... and keeps its label
    house = labelled & (corpus["input_ids"] == HOUSE)
    assert house.any() and set(out["labels"][house].tolist()) <= {HAUS, CASA, LOGIS, FOYER, DEMEURE}  # x = 100 %
    dictionary_only = mask_dict_mlm_batch(corpus, table, dataclasses.replace(masking, mask_words="dictionary"),
                                          RowRandom.for_batch(rows, seed=9))
    assert not ((dictionary_only["labels"] != IGNORE_INDEX) & big).any()  # §2.2: BIG is never masked


def test_without_the_conditioned_head_the_loss_is_the_model_s_own_mlm_head_on_language_embedded_inputs():
    """ALIGN-MLM's re-run (App. G.4, conditioned_head=false): language ids still at the input, no conditioning."""
    masked_lm = tiny_model()
    objective = DictMLMObjective.for_model(masked_lm, num_languages=len(LANGUAGES), conditioned_head=False)
    assert objective.head is None
    torch.nn.init.normal_(objective.language_embeddings.embedding.weight)
    batch = masked_example()
    loss = objective(Encoder(masked_lm), batch)
    ids = batch["masked_ids"]
    embeds = (masked_lm.roberta.embeddings.word_embeddings.weight[ids]
              + objective.language_embeddings.embedding.weight[batch["lang_ids"]])
    not_pad = (ids != PAD).long()
    states = masked_lm.roberta(inputs_embeds=embeds, position_ids=torch.cumsum(not_pad, 1) * not_pad + PAD,
                               attention_mask=batch["attention_mask"]).last_hidden_state
    logits = masked_lm.lm_head(states)
    expected = F.cross_entropy(logits.view(-1, len(VOCAB)), batch["labels"].view(-1), ignore_index=IGNORE_INDEX)
    torch.testing.assert_close(loss, expected)
    plain = masked_lm(input_ids=ids, attention_mask=batch["attention_mask"], labels=batch["labels"]).loss
    assert not torch.allclose(loss, plain)  # the language embeddings do reach the input
