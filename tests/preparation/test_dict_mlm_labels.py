"""What reaches DICT-MLM in a run: the share of cross-lingual synonym labels grows with x as DICT-MLM-x says;
synonyms of any subword length are spliced in at the configured share."""

from __future__ import annotations

import pytest
import torch
from conftest import QUICKSTART, REPO, SMALL

from distalign.config import load_config
from distalign.models.loading import load_tokenizer
from distalign.objectives.mlm import IGNORE_INDEX
from distalign.preparation.inputs import prepare_data
from distalign.preparation.ray_streams import local_streams, stream_jobs


def cross_lingual_label_share(percent: int) -> tuple[float, int]:
    config = load_config(
        QUICKSTART,
        SMALL
        + [
            "run.name=dict-labels",
            "objectives.mlm.weight=0",
            "objectives.dict_mlm.weight=1",
            f"objectives.dict_mlm.synonym_label_percent={percent}",
            "train.corpus_batch_size=32",
            "train.max_steps=60",
        ],
    )
    corpus = local_streams(prepare_data(config), config)["corpus"]
    cross = labelled = 0
    for _ in range(60):
        batch = next(corpus)
        has_label = batch["labels"] != IGNORE_INDEX
        # a synonym's tokens carry its language at the input too: compare with the row's ([CLS]'s) language
        is_cross = has_label & (batch["label_lang_ids"] != batch["lang_ids"][:, :1])
        for row, word_ids in enumerate(batch["word_ids"]):  # words, not tokens: a synonym may be longer
            labelled += len(set(word_ids[has_label[row]].tolist()))
            cross += len(set(word_ids[is_cross[row]].tolist()))
    return cross / labelled, cross


@pytest.fixture(scope="module")
def shares(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DISTALIGN_HOME", str(tmp_path_factory.mktemp("dict-labels")))
        yield {x: cross_lingual_label_share(x) for x in (0, 50, 90)}


def test_synonym_labels_follow_x(shares):
    assert shares[0][0] == 0.0  # DICT-MLM-0 is plain (dictionary-restricted) MLM
    (share50, _), (share90, n90) = shares[50], shares[90]
    assert n90 > 100
    # the same seeds mask the same words: only the x% draw differs, so the shares scale with x
    assert abs(share90 / share50 - 90 / 50) < 0.2
    # x plus sampling noise (fallback sentences pull it down): seed 0's draws run high, 56 % / 91 % of the
    # selected dictionary words replaced at x = 50 / 90 (seeds 1-3: 44-47 % and 86-89 % of labelled words)
    assert share50 < share90 < 0.95


def test_synonyms_of_any_length_reach_the_batches_at_the_configured_share(distalign_home):
    """The real batch path (prepared world, the run's tokenizer, ``local_streams``), ALIGN-MLM's re-run reading
    (every word maskable, x = 50): half of the masked dictionary words are replaced, and no pair is dropped for
    its length: every cross-lingual single-word pair is in the table (before splicing, only the pairs of equal
    subword length were), and replacements that change a word's length reach the batches."""
    config = load_config(
        REPO / "jobs" / "configs" / "dict_mlm_tiny.yaml",
        SMALL
        + [
            "run.name=dict-splice",
            "objectives.dict_mlm.mask_words=all",
            "train.corpus_batch_size=32",
            "train.max_steps=80",
        ],
    )
    prepared = prepare_data(config)
    table = stream_jobs(prepared, config, ("corpus",))["corpus"].preparer.table
    tokenizer = load_tokenizer(prepared.model_path)
    pairs = {
        (r["lang1"], r["word1"], r["lang2"], r["word2"])
        for r in prepared.word_pairs.to_pylist()
        if r["lang1"] != r["lang2"]
    }
    span = {
        w: len(tokenizer([[w]], is_split_into_words=True, add_special_tokens=False)["input_ids"][0])
        for p in pairs
        for w in (p[1], p[3])
    }
    equal = {p for p in pairs if span[p[1]] == span[p[3]]}
    directed = pairs | {(l2, w2, l1, w1) for l1, w1, l2, w2 in pairs}
    assert len(table.synonym_ids) == len(directed) and "length_mismatch" not in table.dropped
    assert len(equal) < len(pairs)  # before: only these were usable (measured 322 of 528 directed synonyms)
    lengths = {(lang, ids): len(ids) for lang, ids in table.entries}
    own_language = {}  # (language, synonym ids) -> lengths of its synonyms, by their language
    for (lang, ids), e in table.entries.items():
        for g in range(table.group_offsets[e], table.group_offsets[e + 1]):
            for s in range(table.synonym_offsets[g], table.synonym_offsets[g + 1]):
                key = (int(table.group_lang[g]), tuple(t for t in table.synonym_ids[s].tolist() if t >= 0))
                own_language.setdefault((key, lang), set()).add(lengths[(lang, ids)])

    corpus = local_streams(prepared, config)["corpus"]
    words = masked_with_entry = replaced = resized = 0
    for _ in range(80):
        batch = next(corpus)
        labels, lang_ids, word_ids = batch["labels"], batch["lang_ids"], batch["word_ids"]
        clean = torch.where(labels != IGNORE_INDEX, labels, batch["masked_ids"])
        for row in range(len(labels)):
            sentence = int(lang_ids[row, 0])
            for word in set(word_ids[row][word_ids[row] >= 0].tolist()):
                at = (word_ids[row] == word).nonzero().flatten()
                key = (int(lang_ids[row, at[0]]), tuple(clean[row, at].tolist()))
                words += 1
                if labels[row, at[0]] == IGNORE_INDEX or key not in table.entries:
                    continue
                masked_with_entry += 1
                if key[0] != sentence:
                    replaced += 1  # a synonym in another language: every word it can stand for has another length
                    resized += len(key[1]) not in own_language[(key, sentence)]
    assert abs(masked_with_entry / words - 0.15 * 0.7) < 0.03  # ~70 % of the world's words have an entry
    assert abs(replaced / masked_with_entry - 0.5) < 0.06, (replaced, masked_with_entry)  # 4 sd (~1,100 words)
    assert resized > 0.2 * replaced, (resized, replaced)
