"""Static targets derived from the starting model: X2Static per language, Procrustes onto the pivot."""

import numpy as np
import pyarrow as pa
import pytest
import torch
from scipy.linalg import orthogonal_procrustes

from distalign.config import TinyModelConfig
from distalign.models.loading import build_tiny_model
from distalign.preparation.static_targets import derive_static_vectors, seed_pairs_between
from distalign.static.procrustes import normalize_embeddings
from distalign.static.word2vec_format import read_word2vec

WORDS = (
    "sun moon star river stone tree bird fish cloud rain wind snow hill lake road door wall roof "
    "bread milk salt fire ash leaf root seed horn bone skin hair"
).split()
SEED = WORDS[:20]  # more seed pairs than dimensions: the orthogonal map is unique


def pairs_table(rows):
    return pa.table({k: [r[i] for r in rows] for i, k in enumerate(("word1", "lang1", "word2", "lang2"))})


def test_seed_pairs_come_from_both_column_orders():
    table = pairs_table(
        [("a", "xa", "b", "xb"), ("c", "xb", "d", "xa"), ("e", "xa", "f", "xc"), ("g", "xb", "h", "xb")]
    )
    assert seed_pairs_between(table, "xb", "xa") == [("b", "a"), ("c", "d")]
    assert seed_pairs_between(table, "xc", "xb") == []


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Language xb is xa with every word renamed (x -> x + 'o'); a tiny model trained on both."""
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("derive")
    rng = np.random.default_rng(0)
    xa = [" ".join(rng.choice(WORDS, size=6)) for _ in range(200)]
    xb = [" ".join(w + "o" for w in s.split()) for s in xa]
    (root / "xa.txt").write_text("\n".join(xa) + "\n")
    (root / "xb.txt").write_text("\n".join(xb) + "\n")
    model = build_tiny_model(
        root / "model",
        xa + xb,
        TinyModelConfig(vocab_size=120, hidden_size=8, num_layers=1, num_heads=2, intermediate_size=32, max_length=16),
    )
    pairs = pairs_table([(w + "o", "xb", w, "xa") for w in SEED])
    return root, str(model), pairs


def test_pivot_is_normalised_and_the_other_language_mapped_by_the_seed_procrustes(world):
    root, model, pairs = world
    corpora = [(str(root / "xb.txt"), "xb"), (str(root / "xa.txt"), "xa")]
    sources = derive_static_vectors(model, corpora, pairs, root / "static", layer=1, epochs=1, iterations=0)
    assert [(s.lang, s.path) for s in sources] == [
        ("xa", str(root / "static" / "xa.aligned.vec")),
        ("xb", str(root / "static" / "xb.aligned.vec")),
    ]
    raw = {lang: read_word2vec(root / "static" / f"{lang}.x2static.vec")[:2] for lang in ("xa", "xb")}
    pivot_words, pivot = read_word2vec(sources[0].path)[:2]
    mapped_words, mapped = read_word2vec(sources[1].path)[:2]
    assert pivot_words == raw["xa"][0] and mapped_words == raw["xb"][0]
    np.testing.assert_allclose(pivot, normalize_embeddings(raw["xa"][1]), atol=1e-5)
    # independently: the orthogonal map fitted on the seed rows of the normalised spaces
    src, tgt = normalize_embeddings(raw["xb"][1]), normalize_embeddings(raw["xa"][1])
    rows = [mapped_words.index(w + "o") for w in SEED]
    cols = [pivot_words.index(w) for w in SEED]
    w_map = orthogonal_procrustes(src[rows], tgt[cols])[0]
    np.testing.assert_allclose(mapped, src @ w_map, atol=1e-4)


def test_a_resumed_run_reuses_the_files(world):
    root, model, pairs = world
    corpora = [(str(root / "xa.txt"), "xa"), (str(root / "xb.txt"), "xb")]
    first = derive_static_vectors(model, corpora, pairs, root / "again", layer=1, epochs=1, iterations=1)
    stamps = [(root / "again" / f"{lang}.aligned.vec").stat().st_mtime_ns for lang in ("xa", "xb")]
    assert derive_static_vectors(model, corpora, pairs, root / "again", layer=1, epochs=1, iterations=1) == first
    assert [(root / "again" / f"{lang}.aligned.vec").stat().st_mtime_ns for lang in ("xa", "xb")] == stamps


def test_no_seed_pairs_with_the_pivot_is_an_error_naming_both_languages(world):
    root, model, _ = world
    corpora = [(str(root / "xa.txt"), "xa"), (str(root / "xb.txt"), "xb")]
    with pytest.raises(ValueError, match="'xb' and the pivot 'xa'"):
        derive_static_vectors(
            model, corpora, pairs_table([("a", "xa", "b", "xc")]), root / "none", layer=1, epochs=1, iterations=0
        )


def test_the_static_stream_passes_every_row_once_an_epoch_in_a_new_order():
    """Deep CCA's statistics are those of a batch: the same batches every epoch would repeat them."""
    from conftest import QUICKSTART

    from distalign.config import load_config
    from distalign.data.stream_plugins import STREAMS
    from distalign.preparation.table_rows import EpochRows, MappedTable

    words = [f"w{i}" for i in range(64)]
    table = pa.table({"word": words, "row": np.zeros(64, dtype=np.int64)})
    config = load_config(QUICKSTART, ["train.seed=3"])
    rows = EpochRows(MappedTable.of(table), STREAMS["static"].epoch_order(table, config.run_facts()))
    epochs = [rows.at(np.arange(64 * epoch, 64 * (epoch + 1))) for epoch in range(3)]
    orders = [e["word"].to_pylist() for e in epochs]
    assert all(sorted(order) == sorted(words) for order in orders)
    assert orders[0] != orders[1] != orders[2] != orders[0]
    assert epochs[1]["row"].to_pylist() == list(range(64)) and set(epochs[1]["epoch"].to_pylist()) == {1}
    again = EpochRows(
        MappedTable.of(table), STREAMS["static"].epoch_order(table, config.run_facts())
    )  # a resume, another worker
    assert again.at(np.arange(64, 128))["word"].to_pylist() == orders[1]
