"""distalign.eval.tasks: rows per layer, OOV handling, known answers from constructed vectors, a tiny-model run."""

import math
import random
from types import SimpleNamespace

import pytest
import torch

import distalign.eval.local_evaluation as in_process
from distalign.config import TinyModelConfig
from distalign.eval.bli_metrics import mrr
from distalign.eval.local_evaluation import evaluate_locally
from distalign.eval.tasks import BLITask, TatoebaTask, WordAlignmentTask, XLSimTask
from distalign.models.encoder import Encoder
from distalign.models.loading import build_tiny_model, load_masked_lm, load_tokenizer

E = torch.eye(4)
NUM_LAYERS = 2  # hidden states 0..2
FAKE_MODEL = SimpleNamespace(masked_lm=SimpleNamespace(config=SimpleNamespace(num_hidden_layers=NUM_LAYERS)))


def fake_encoder(table, calls):
    """Stands in for encode_text_set: table[lang][text] is a [L+1, d] tensor."""

    def encode(model, tokenizer, text_set, settings=None, cache=None):
        calls.append((text_set.lang, list(text_set.texts)))
        return torch.stack([table[text_set.lang][t] for t in text_set.texts], dim=1)

    return encode


def run(task):
    return evaluate_locally(FAKE_MODEL, None, [task])


def bli_task(model, tokenizer, lang1, lang2, pairs, vocab, **options):
    lowercase = options.pop("lowercase", True)
    return evaluate_locally(
        model, tokenizer, [BLITask.from_pairs(lang1, lang2, pairs, vocab, lowercase=lowercase, **options)]
    )


def layers(*vectors):
    return torch.stack([torch.as_tensor(v, dtype=torch.float32) for v in vectors])


# vocabulary a b c d = the 4 unit vectors at every layer
VOCAB = ["a", "b", "c", "d"]
TARGETS = {w: layers(E[i], E[i], E[i]) for i, w in enumerate(VOCAB)}
QUERIES = {
    # layer 0: both right; layer 1: x right, y nearest c then b (rank 2); layer 2: x rank 4, y rank 3
    "x": layers(E[0], E[0], [0.1, 0.4, 0.3, 0.2]),
    "y": layers(E[1], [0.0, 0.5, 0.9, 0.0], [0.3, 0.1, 0.0, 0.5]),
}
QUERIES["Y"] = QUERIES["y"]


@pytest.fixture
def bli_calls(monkeypatch):
    calls = []
    monkeypatch.setattr(in_process, "encode_text_set", fake_encoder({"en": QUERIES, "de": TARGETS}, calls))
    return calls


def by_layer(rows, metric):
    return [r["value"] for r in sorted(rows, key=lambda r: r["layer"]) if r["metric"] == metric]


def test_bli_known_ranks_and_row_layout(bli_calls):
    rows = bli_task(FAKE_MODEL, None, "en", "de", [("x", "a"), ("y", "b")], VOCAB)
    metrics = ["mrr", "p_at_1", "p_at_5", "p_at_10", "oov"]
    assert len(rows) == (NUM_LAYERS + 1) * len(metrics)
    assert {r["metric"] for r in rows} == set(metrics)
    assert all(r["task"] == "bli" and r["pair"] == "en-de" for r in rows)
    assert by_layer(rows, "mrr") == pytest.approx([1.0, 0.75, (1 / 4 + 1 / 3) / 2])
    assert by_layer(rows, "p_at_1") == pytest.approx([1.0, 0.5, 0.0])
    assert by_layer(rows, "p_at_5") == pytest.approx([1.0, 1.0, 1.0])
    assert by_layer(rows, "oov") == [0, 0, 0]


def test_bli_oov_queries_are_counted_skipped_and_vocab_not_extended(bli_calls):
    pairs = [("x", "A"), ("y", "b"), ("y", "zzz"), ("z", "zzz"), ("w", "qqq"), ("Y", "b")]
    rows = bli_task(FAKE_MODEL, None, "en", "de", pairs, VOCAB, k_values=(1,))
    # x -> a only after lowercasing; y keeps its in-vocabulary gold b; z and w have no gold left
    assert by_layer(rows, "oov") == [2, 2, 2]
    assert bli_calls == [("en", ["x", "y"]), ("de", VOCAB)]
    assert by_layer(rows, "mrr")[1] == pytest.approx(0.75)
    assert len(rows) == (NUM_LAYERS + 1) * 3

    bli_calls.clear()
    cased = bli_task(FAKE_MODEL, None, "en", "de", pairs, VOCAB, k_values=(1,), lowercase=False)
    assert by_layer(cased, "oov") == [3, 3, 3]  # "A" is not in the vocabulary; "Y" is a query of its own
    assert bli_calls == [("en", ["y", "Y"]), ("de", VOCAB)]


def test_bli_all_oov_gives_nan_scores_without_encoding(bli_calls):
    rows = bli_task(FAKE_MODEL, None, "en", "de", [("x", "nope")], VOCAB)
    assert bli_calls == []
    assert by_layer(rows, "oov") == [1, 1, 1]
    assert all(math.isnan(r["value"]) for r in rows if r["metric"] != "oov")
    assert len(rows) == (NUM_LAYERS + 1) * 5


def test_bli_csls_matches_metric_function(bli_calls):
    rows = bli_task(FAKE_MODEL, None, "en", "de", [("x", "a"), ("y", "b")], VOCAB, similarity="csls")
    assert {r["task"] for r in rows} == {"bli_csls"}
    src = torch.stack([QUERIES["x"], QUERIES["y"]], dim=1)
    tgt = torch.stack([TARGETS[w] for w in VOCAB], dim=1)
    assert by_layer(rows, "mrr") == pytest.approx([mrr(s, t, [[0], [1]], "csls") for s, t in zip(src, tgt)])


def test_xlsim_spearman_per_layer(monkeypatch):
    angles = [0.1, 0.5, 0.9, 1.3]  # cosine to e0 falls as the angle grows
    en = {f"w{i}": layers(E[0], E[0], E[0]) for i in range(4)}
    fr = {
        f"m{i}": layers(
            [math.cos(a), math.sin(a), 0, 0],
            [math.cos(a), math.sin(a), 0, 0],
            [math.cos(1.4 - a), math.sin(1.4 - a), 0, 0],
        )
        for i, a in enumerate(angles)
    }
    calls = []
    monkeypatch.setattr(in_process, "encode_text_set", fake_encoder({"en": en, "fr": fr}, calls))
    data = [("w0", "m0", 4.0), ("w1", "m1", 3.0), ("w2", "m2", 2.0), ("w3", "m3", 1.0), ("w0", "m3", 1.0)]
    rows = run(XLSimTask("en", "fr", data[:4]))
    assert len(rows) == NUM_LAYERS + 1 and {r["metric"] for r in rows} == {"spearman"}
    assert by_layer(rows, "spearman") == pytest.approx([1.0, 1.0, -1.0])
    calls.clear()
    run(XLSimTask("en", "fr", data))
    assert calls == [("en", ["w0", "w1", "w2", "w3"]), ("fr", ["m0", "m1", "m2", "m3"])]  # each word once


def test_tatoeba_both_directions(monkeypatch):
    src = {f"s{i}": layers(E[i], E[i], E[i]) for i in range(4)}
    # layer 0 aligned; layer 1: e0 and e1 swapped on the English side; layer 2: e2 is also close to s3
    eng = {
        "t0": layers(E[0], E[1], E[0]),
        "t1": layers(E[1], E[0], E[1]),
        "t2": layers(E[2], E[2], [0, 0, 1, 1]),
        "t3": layers(E[3], E[3], E[3]),
    }
    monkeypatch.setattr(in_process, "encode_text_set", fake_encoder({"deu": src, "eng": eng}, []))
    rows = run(TatoebaTask("deu", ["s0", "s1", "s2", "s3"], ["t0", "t1", "t2", "t3"]))
    assert len(rows) == (NUM_LAYERS + 1) * 3 and {r["pair"] for r in rows} == {"deu-eng"}
    assert by_layer(rows, "acc_to_eng") == pytest.approx([1.0, 0.5, 1.0])
    # eng -> deu at layer 2: t2 = (e2 + e3)/sqrt2 ties s2 and s3; a tie with the aligned row counts as a hit
    assert by_layer(rows, "acc_from_eng") == pytest.approx([1.0, 0.5, 1.0])
    assert by_layer(rows, "acc") == pytest.approx([1.0, 0.5, 1.0])


def test_tatoeba_headline_is_xxx_to_eng_as_xtreme_scores_it(monkeypatch):
    # deu -> eng: s0 = e0 finds t0 (hit); s1 = (1, 0.5) is nearer t0 (cos 0.89) than t1 (0.45): a miss -> 0.5.
    # eng -> deu: t0 = e0 finds s0 (cos 1 vs 0.89, hit); t1 = e1 finds s1 (0.45 vs 0, hit) -> 1.0
    src = {"s0": layers(E[0]), "s1": layers([1.0, 0.5, 0, 0])}
    eng = {"t0": layers(E[0]), "t1": layers(E[1])}
    monkeypatch.setattr(in_process, "encode_text_set", fake_encoder({"deu": src, "eng": eng}, []))
    rows = evaluate_locally(FAKE_MODEL, None, [TatoebaTask("deu", ["s0", "s1"], ["t0", "t1"])], layers=[0])
    metrics = {r["metric"]: r["value"] for r in rows}
    assert metrics == pytest.approx({"acc": 0.5, "acc_to_eng": 0.5, "acc_from_eng": 1.0})  # not the mean 0.75


def test_tatoeba_mean_of_the_last_layers(monkeypatch):
    # s1 is e1, 2 e1, e0 at layers 0, 1, 2; s0 = t0 = e0 and t1 = e1 at every layer
    src = {"s0": layers(E[0], E[0], E[0]), "s1": layers(E[1], 2 * E[1], E[0])}
    eng = {"t0": layers(E[0], E[0], E[0]), "t1": layers(E[1], E[1], E[1])}
    monkeypatch.setattr(in_process, "encode_text_set", fake_encoder({"deu": src, "eng": eng}, []))
    # layer 2 alone: s1 = e0 finds t0 (ties t0 and t1 count as ties only for the aligned row): a miss -> 0.5
    assert by_layer(run(TatoebaTask("deu", ["s0", "s1"], ["t0", "t1"])), "acc") == pytest.approx([1.0, 1.0, 0.5])
    rows = run(TatoebaTask("deu", ["s0", "s1"], ["t0", "t1"], mean_of_layers=2))
    assert sorted({r["layer"] for r in rows}) == [1, 2]  # layer 0 has no layer below it to average with
    # layer 1 = mean of layers 0..1: s1 = 1.5 e1 (hit); layer 2 = mean of 1..2: s1 = (0.5, 1), cos 0.89 to t1 and
    # 0.45 to t0 (hit)
    assert by_layer(rows, "acc") == pytest.approx([1.0, 1.0])


def test_alignment_score_per_layer(monkeypatch):
    en = {w: layers(E[i], E[i], E[i]) for i, w in enumerate(["one", "two", "three", "four"])}
    # layer 0 aligned; layer 1 every translation shifted by one; layer 2 the last two swapped
    swapped = [0, 1, 3, 2]
    de = {w: layers(E[i], E[(i + 1) % 4], E[swapped[i]]) for i, w in enumerate(["eins", "zwei", "drei", "vier"])}
    monkeypatch.setattr(in_process, "encode_text_set", fake_encoder({"en": en, "de": de}, []))
    pairs = list(zip(en, de))
    rows = run(WordAlignmentTask("en", "de", pairs))
    assert by_layer(rows, "score") == pytest.approx([100.0, 0.0, 50.0])
    assert {(r["task"], r["pair"], r["metric"]) for r in rows} == {("word_alignment", "en-de", "score")}


def test_all_tasks_run_on_a_tiny_model(tmp_path):
    rng = random.Random(0)
    words = ["dog", "cat", "house", "tree", "river", "stone", "bird", "sun", "moon", "water"]
    texts = [" ".join(rng.choices(words, k=rng.randint(3, 7))) for _ in range(200)]
    cfg = TinyModelConfig(vocab_size=300, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)
    path = str(build_tiny_model(tmp_path / "model", texts, cfg))
    model, tokenizer = Encoder(load_masked_lm(path), -1), load_tokenizer(path)
    pairs = list(zip(words[:5], words[5:]))
    all_rows = evaluate_locally(
        model,
        tokenizer,
        [
            BLITask.from_pairs("xa", "xb", pairs, words, similarity="csls"),
            XLSimTask("xa", "xb", [(a, b, float(i)) for i, (a, b) in enumerate(pairs)]),
            TatoebaTask("xxa", texts[:6], texts[6:12]),
            WordAlignmentTask("xa", "xb", pairs),
        ],
    )
    for name, metrics in [("bli_csls", 5), ("xlsim", 1), ("tatoeba", 3), ("word_alignment", 1)]:
        rows = [r for r in all_rows if r["task"] == name]
        assert len(rows) == (cfg.num_layers + 1) * metrics
        assert sorted({r["layer"] for r in rows}) == list(range(cfg.num_layers + 1))
        assert all(math.isfinite(r["value"]) for r in rows)


# ---------------------------------------------------------------- BLI per pair (BabelBERT) vs grouped
def test_bli_per_pair_ranks_each_pair_with_the_other_translations_competing():
    # "a" has two translations x (ranked 1st by the vectors) and y (2nd); "b" -> z (1st); "c" is outside the
    # source vocabulary
    pairs = [("a", "x"), ("a", "y"), ("b", "z"), ("c", "x")]
    vectors = {
        "src": torch.tensor([[1.0, 0.0], [0.0, 1.0]]),  # source vocabulary: a, b
        "tgt": torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]]),
    }  # x, y, z
    per_pair = BLITask.from_pairs("l1", "l2", pairs, ["x", "y", "z"], source_vocab=["a", "b"], ranking="per_pair")
    assert per_pair.queries == ["a", "a", "b"] and per_pair.gold == [[0], [1], [2]] and per_pair.oov_source == 1
    assert per_pair.text_sets()["src"].texts == ["a", "b"]
    scores = per_pair.score(vectors)
    assert scores["mrr"] == pytest.approx((1 + 1 / 2 + 1) / 3)  # y ranks behind its competitor x
    assert scores["oov_source"] == 1 and scores["p_at_1"] == pytest.approx(2 / 3)
    grouped = BLITask.from_pairs("l1", "l2", pairs, ["x", "y", "z"], source_vocab=["a", "b"])
    assert grouped.queries == ["a", "b", "c"] and grouped.gold == [[0, 1], [2], [0]]
    assert grouped.text_sets()["src"].texts == ["a", "b", "c"]  # a grouped query outside the space is still encoded
    both = grouped.score({"src": torch.cat([vectors["src"], torch.tensor([[0.7, 0.7]])]), "tgt": vectors["tgt"]})
    # by hand: a -> x first (1), b -> z first (1); c = (.7, .7) scores y 0.78 and z 0.707, tied with its gold x:
    # ties count against the gold, so x ranks 3rd
    assert "oov_source" not in both and both["mrr"] == pytest.approx((1 + 1 + 1 / 3) / 3)


def test_csls_source_space_is_the_source_vocabulary_without_the_queries_encoded_beside_it():
    """A query outside the source vocabulary ("Haus" written as in G-BLI) is encoded for its own vector but is
    not a neighbour in r_S, which CSLS computes over the source vocabulary."""
    from distalign.eval.bli_metrics import gold_ranks

    task = BLITask.from_pairs(
        "de",
        "en",
        [("Haus", "house"), ("baum", "tree")],
        ["house", "tree", "stone"],
        source_vocab=["haus", "baum"],
        similarity="csls",
        csls_k=1,
    )
    assert task.text_sets()["src"].texts == ["haus", "baum", "Haus"] and task.queries == ["Haus", "baum"]
    src = torch.tensor([[-0.1, 0.7], [-0.1, -1.6], [0.2, 0.5]])  # haus, baum, Haus (found by a seeded search)
    tgt = torch.tensor([[-0.6, 1.5], [1.3, 0.6], [-1.6, 0.8]])  # house, tree, stone
    expected = gold_ranks(src[[2, 1]], tgt, [[0], [1]], "csls", 1, src_space=src[:2])
    polluted = gold_ranks(src[[2, 1]], tgt, [[0], [1]], "csls", 1, src_space=src)
    assert expected.tolist() == [2, 1] and polluted.tolist() == [2, 2]  # the extra row changes r_S
    assert task.score({"src": src, "tgt": tgt})["mrr"] == pytest.approx((1 / expected.double()).mean().item())
