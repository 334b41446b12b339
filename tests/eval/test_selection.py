"""distalign.eval.selection: test sets (grouping by source word, gold indices, seeded subsets), selection score."""

import pytest

from distalign.eval.tasks.bli import BLISettings, build_test_set


def test_groups_translations_by_source_word():
    src = ["dog", "cat", "dog", "house", "cat", "tree"]
    tgt = ["Hund", "Katze", "Rüde", "Haus", "Mieze", "Baum"]
    ts = build_test_set("en", "de", src, tgt)
    assert ts.pair == "en-de" and ts.lang1 == "en" and ts.lang2 == "de"
    assert ts.queries == ["dog", "cat", "house", "tree"]  # distinct, first-seen order
    assert ts.vocab == sorted(set(tgt))
    assert ts.vocab == ["Baum", "Haus", "Hund", "Katze", "Mieze", "Rüde"]
    assert ts.gold == [[2, 5], [3, 4], [1], [0]]
    expected = {"dog": {"Hund", "Rüde"}, "cat": {"Katze", "Mieze"}, "house": {"Haus"}, "tree": {"Baum"}}
    for query, gold in zip(ts.queries, ts.gold):
        assert {ts.vocab[i] for i in gold} == expected[query]


def test_shared_target_word_is_one_vocab_entry():
    ts = build_test_set("en", "de", ["big", "large", "small"], ["groß", "groß", "klein"])
    assert ts.vocab == ["groß", "klein"]
    assert ts.gold == [[0], [0], [1]]


def make_dictionary(n=50):
    src, tgt = [], []
    for i in range(n):
        for j in range(1 + i % 3):  # 1-3 translations per source word
            src.append(f"s{i}")
            tgt.append(f"t{i}_{j}")
    return src, tgt


def test_max_pairs_keeps_that_many_source_words_reproducibly():
    src, tgt = make_dictionary()
    a = build_test_set("xa", "xb", src, tgt, BLISettings(max_pairs=10, seed=3))
    b = build_test_set("xa", "xb", src, tgt, BLISettings(max_pairs=10, seed=3))
    assert a == b
    assert len(a.queries) == len(set(a.queries)) == 10
    assert set(a.queries) <= set(src)
    # order of the kept queries follows the dictionary
    assert a.queries == sorted(a.queries, key=lambda q: int(q[1:]))
    # the vocabulary holds exactly the kept words' translations, and the gold still points at them
    wanted = {q: {t for s, t in zip(src, tgt) if s == q} for q in a.queries}
    assert set(a.vocab) == set().union(*wanted.values())
    for query, gold in zip(a.queries, a.gold):
        assert {a.vocab[i] for i in gold} == wanted[query]
        assert len(gold) == 1 + int(query[1:]) % 3
    others = {
        tuple(build_test_set("xa", "xb", src, tgt, BLISettings(max_pairs=10, seed=s)).queries) for s in range(4, 9)
    }
    assert len(others | {tuple(a.queries)}) > 1


def test_max_pairs_zero_or_large_keeps_all():
    src, tgt = make_dictionary(12)
    full = build_test_set("xa", "xb", src, tgt)
    assert len(full.queries) == 12
    assert build_test_set("xa", "xb", src, tgt, BLISettings(max_pairs=12)) == full
    assert build_test_set("xa", "xb", src, tgt, BLISettings(max_pairs=100)) == full
    assert build_test_set("xa", "xb", src, tgt, BLISettings(max_pairs=0)) == full


def test_model_selection_score_is_mean_relative_mrr_gain():
    from distalign.eval.selection import pair_mrrs, relative_mrr_gain

    metrics = {"eval/bli/en-de/mrr": 0.3, "eval/bli/en-fi/mrr": 0.1, "eval/bli/avg/mrr": 0.2, "Train/loss": 1.0}
    assert pair_mrrs(metrics) == {"en-de": 0.3, "en-fi": 0.1}
    # (0.3 - 0.2) / 0.2 = 0.5 and (0.1 - 0.2) / 0.2 = -0.5 -> 0; a pair with vanilla MRR 0 is left out
    assert relative_mrr_gain(
        {"en-de": 0.3, "en-fi": 0.1, "x-y": 0.4}, {"en-de": 0.2, "en-fi": 0.2, "x-y": 0.0}
    ) == pytest.approx(0.0)
    assert relative_mrr_gain({"en-de": 0.25}, {"en-de": 0.2}) == pytest.approx(0.25)
    assert relative_mrr_gain({"en-de": 0.25}, {"en-de": 0.0}) != relative_mrr_gain({"en-de": 0.25}, {"en-de": 0.0})


def test_a_frequency_list_is_the_candidate_set_when_given():
    """BabelBERT validates against the top-100K words: the gold competes with frequent words outside the
    dictionary, and a gold word missing from the list is out of vocabulary (skipped and counted)."""
    ts = build_test_set(
        "en",
        "de",
        ["dog", "house", "tree"],
        ["Hund", "Haus", "Baum"],
        BLISettings(ranking="per_pair"),
        vocab=["der", "haus", "und", "hund", "katze"],
    )
    assert ts.vocab == sorted(["der", "haus", "und", "hund", "katze"])  # lower-cased like the shared lists
    assert [ts.vocab[g] for (g,) in ts.gold] == ["hund", "haus"] and ts.queries == ["dog", "house"]
    assert ts.oov == 1


def test_eval_vocab_dir_reads_the_target_language_s_list_on_the_driver(tmp_path, monkeypatch):
    from conftest import QUICKSTART, SMALL

    from distalign.config import load_config
    from distalign.preparation.inputs import prepare_data

    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path))
    vocab_dir = tmp_path / "vocab"
    vocab_dir.mkdir()
    (vocab_dir / "xb_vocab.txt").write_text("".join(f"w{i}\n" for i in range(30)))
    config = load_config(
        QUICKSTART,
        SMALL + ["run.name=vocab", f"eval.vocab_dir={vocab_dir}", "eval.vocab_size=20", "eval.languages=[xa,xb]"],
    )
    prepared = prepare_data(config)
    (pairs,) = prepared.eval_pairs
    assert (pairs.lang2, pairs.vocab) == ("xb", [f"w{i}" for i in range(20)])
    # what the workers rank against: the list with two of the held-out targets in it, frequent words competing
    from distalign.train.trainer import plan_training

    targets = list(dict.fromkeys(pairs.tgt))[:2]
    (vocab_dir / "xb_vocab.txt").write_text("".join(f"{w}\n" for w in [f"w{i}" for i in range(10)] + targets))
    (test_set,) = plan_training(config, prepare_data(config), "").bli_test_sets
    assert test_set.vocab == sorted([f"w{i}" for i in range(10)] + targets)
    assert {test_set.vocab[g] for gold in test_set.gold for g in gold} == set(targets) and test_set.oov > 0
    config = load_config(
        QUICKSTART, SMALL + ["run.name=vocab2", f"eval.vocab_dir={vocab_dir}", "eval.languages=[xa,xc]"]
    )
    with pytest.raises(ValueError, match=r"eval.vocab_dir: no xc_vocab.txt"):
        prepare_data(config)


def test_a_dictionary_s_test_set_keeps_its_casing_and_its_languages_canonical(tmp_path):
    """``distalign eval --dictionary``: built as in-loop (no vocabulary file: the targets as written, not
    lower-cased, even beside an eval dir whose frequency list would take over), languages in canonical codes."""
    from distalign.eval.suite import build_tasks
    from distalign.eval.suite_spec import SuiteSpec

    (tmp_path / "vocab").mkdir()
    (tmp_path / "vocab" / "de_vocab.txt").write_text("der\nhaus\n")
    path = tmp_path / "test.tsv"
    path.write_text("house\tHaus\ntree\tBaum\n")
    (task,) = build_tasks(
        SuiteSpec(eval_dir=str(tmp_path), tasks=("bli",), bli_pairs=(), dictionaries=(("eng", "deu", str(path)),))
    )
    assert (task.pair, task.vocab, task.queries) == ("en-de", ["Baum", "Haus"], ["house", "tree"])
    assert task == build_test_set("en", "de", ["house", "tree"], ["Haus", "Baum"], BLISettings(layer=None))


def test_a_test_set_scores_only_its_layer_and_refuses_one_the_model_lacks():
    from distalign.errors import InputError

    task = build_test_set("en", "de", ["house"], ["Haus"], BLISettings(layer=-2))
    stack = [f"layer {i}" for i in range(3)]
    assert [task.at_layer(stack, layer) for layer in range(3)] == [None, "layer 1", None]
    task.check_model(3)
    with pytest.raises(InputError, match="layer -2 .* 1 hidden states"):
        task.check_model(1)
