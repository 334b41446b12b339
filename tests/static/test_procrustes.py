"""Orthogonal Procrustes: exact recovery, orthogonality, normalisation, self-learning, seed bookkeeping, files."""

import numpy as np
import pytest
from scipy.stats import ortho_group

from distalign.errors import InputError
from distalign.static.mapping import align_files
from distalign.static.procrustes import (
    align_spaces,
    apply_map,
    fit_orthogonal_map,
    mutual_nearest_neighbours,
    normalize_embeddings,
)
from distalign.static.word2vec_format import read_word2vec, write_word2vec


def _isomorphic_spaces(n=200, d=10, noise=0.02, seed=0):
    """Source rows with a decaying spectrum (like real embeddings), target = rotated + noise, rows shuffled."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) * np.geomspace(1.0, 0.1, d)
    q = ortho_group.rvs(d, random_state=seed)
    order = rng.permutation(n)  # target row k translates source row order[k]
    z = (x @ q + noise * rng.normal(size=(n, d)))[order]
    return [f"s{i}" for i in range(n)], x, [f"t{i}" for i in order], z, q


def test_hand_computed_quarter_turn():
    # e1 -> e2 and e2 -> -e1: W = [[0, 1], [-1, 0]] (rows map by x @ W).
    w = fit_orthogonal_map(np.eye(2), np.array([[0.0, 1.0], [-1.0, 0.0]]))
    np.testing.assert_allclose(w, [[0, 1], [-1, 0]], atol=1e-12)


def test_recovers_a_random_rotation_exactly_from_noiseless_pairs():
    rng = np.random.default_rng(1)
    q = ortho_group.rvs(6, random_state=1)
    x = rng.normal(size=(30, 6))
    w = fit_orthogonal_map(x, x @ q)
    np.testing.assert_allclose(w, q, atol=1e-10)
    np.testing.assert_allclose(w.T @ w, np.eye(6), atol=1e-12)


def test_noisy_fit_is_orthogonal_and_matches_the_svd_formula():
    rng = np.random.default_rng(2)
    x, z = rng.normal(size=(20, 5)), rng.normal(size=(20, 5))
    u, _, vt = np.linalg.svd(x.T @ z)
    w = fit_orthogonal_map(x, z)
    np.testing.assert_allclose(w, u @ vt, atol=1e-10)
    np.testing.assert_allclose(w @ w.T, np.eye(5), atol=1e-12)


def test_fit_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="one shape"):
        fit_orthogonal_map(np.zeros((3, 2)), np.zeros((3, 3)))


def test_normalize_hand_computed():
    # unit: [.6,.8],[0,1]; minus mean [.3,.9]: [.3,-.1],[-.3,.1]; unit again: ±[3,-1]/sqrt(10).
    got = normalize_embeddings(np.array([[3.0, 4.0], [0.0, 2.0]]))
    np.testing.assert_allclose(got, np.array([[3, -1], [-3, 1]]) / np.sqrt(10))
    assert np.isfinite(normalize_embeddings(np.array([[1.0, 2.0], [0.0, 0.0]]))).all()


def test_mutual_nearest_neighbours_hand_computed():
    src = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
    tgt = np.array([[1.0, 0.0], [0.0, 1.0]])
    # Sources 0 and 1 both pick target 0, which picks source 0 back; source 2 and target 1 pick each other.
    assert mutual_nearest_neighbours(src, tgt, "cosine") == {(0, 0), (2, 1)}


@pytest.mark.parametrize("normalize", [False, True])
def test_align_spaces_maps_the_dictionary_onto_the_target(normalize):
    src_words, x, tgt_words, z, q = _isomorphic_spaces(noise=0.0)
    pairs = [(s, "t" + s[1:]) for s in src_words]
    w, report = align_spaces(src_words, x, tgt_words, z, pairs, normalize=normalize)
    mapped = apply_map(x, w, normalize)
    target = normalize_embeddings(z) if normalize else z
    position = {word: k for k, word in enumerate(tgt_words)}
    np.testing.assert_allclose(mapped, target[[position["t" + s[1:]] for s in src_words]], atol=1e-9)
    if not normalize:
        np.testing.assert_allclose(w, q, atol=1e-10)
    assert report["dictionary_sizes"] == [200] and report["seed_missing"] == 0


@pytest.mark.parametrize("similarity", ["csls", "cosine"])
def test_self_learning_recovers_the_rotation_from_five_seed_pairs(similarity):
    src_words, x, tgt_words, z, q = _isomorphic_spaces()
    seed = [(f"s{i}", f"t{i}") for i in range(5)]
    w0, _ = align_spaces(src_words, x, tgt_words, z, seed, normalize=False)
    w, report = align_spaces(src_words, x, tgt_words, z, seed, iterations=10, normalize=False, similarity=similarity)
    assert np.abs(w0 - q).max() > 0.5  # five pairs do not pin down a 10-d rotation
    np.testing.assert_allclose(w, q, atol=0.05)
    assert report["converged"] and report["dictionary_sizes"][0] == 5
    assert report["dictionary_sizes"][-1] == report["dictionary_sizes"][-2] >= 190
    induced = mutual_nearest_neighbours(x @ w, z, similarity)
    assert len(induced) >= 190 and all(tgt_words[j] == f"t{i}" for i, j in induced)  # all true translations


def test_missing_seed_words_are_counted():
    src_words, x, tgt_words, z, _ = _isomorphic_spaces(n=20, d=3)
    seed = [("s0", "t0"), ("s1", "t1"), ("nope", "t2"), ("s3", "gone"), ("s4", "t4"), ("s5", "t5")]
    _, report = align_spaces(src_words, x, tgt_words, z, seed)
    assert report["seed_pairs"] == 6 and report["seed_missing"] == 2
    assert report["dictionary_sizes"] == [4]
    assert report["missing_examples"] == [
        "(nope, t2): no vector for source 'nope'",
        "(s3, gone): no vector for target 'gone'",
    ]
    with pytest.raises(ValueError, match="seed_pairs: none of the 1 pairs"):
        align_spaces(src_words, x, tgt_words, z, [("a", "b")])


def test_align_files_end_to_end(tmp_path):
    src_words, x, tgt_words, z, q = _isomorphic_spaces(n=60, d=4, noise=0.0, seed=3)
    write_word2vec(tmp_path / "src.vec", src_words, x)
    write_word2vec(tmp_path / "tgt.vec", tgt_words, z)
    (tmp_path / "dict.tsv").write_text(
        "s0\tt0\ns1\tt1\nbroken line here\ns2\tt2\ns3\tt3\ns4\tt4\nzz\tt5\n", encoding="utf-8"
    )
    report = align_files(
        tmp_path / "src.vec",
        tmp_path / "tgt.vec",
        tmp_path / "dict.tsv",
        tmp_path / "out" / "src.mapped.vec",
        iterations=3,
        tgt_out_path=tmp_path / "out" / "t.vec",
    )
    words, mapped, _ = read_word2vec(tmp_path / "out" / "src.mapped.vec")
    _, tgt_out, _ = read_word2vec(tmp_path / "out" / "t.vec")
    assert words == src_words
    position = {word: k for k, word in enumerate(tgt_words)}
    np.testing.assert_allclose(mapped, tgt_out[[position["t" + s[1:]] for s in src_words]], atol=1e-5)
    assert report["seed_missing"] == 1 and report["dictionary_sizes"][0] == 5
    assert "1 malformed rows skipped" in report["read"][2]
    with pytest.raises(InputError, match="file not found"):
        align_files(tmp_path / "absent.vec", tmp_path / "tgt.vec", tmp_path / "dict.tsv", tmp_path / "o.vec")


def test_align_files_writes_the_normalised_target_space(tmp_path):
    src_words, x, tgt_words, z, _ = _isomorphic_spaces(n=30, d=4, noise=0.0, seed=4)
    write_word2vec(tmp_path / "src.vec", src_words, x)
    write_word2vec(tmp_path / "tgt.vec", tgt_words, z)
    (tmp_path / "dict.tsv").write_text("".join(f"s{i}\tt{i}\n" for i in range(30)), encoding="utf-8")
    align_files(
        tmp_path / "src.vec",
        tmp_path / "tgt.vec",
        tmp_path / "dict.tsv",
        tmp_path / "s.vec",
        tgt_out_path=tmp_path / "t.vec",
    )
    _, mapped, _ = read_word2vec(tmp_path / "s.vec")
    tgt_out_words, tgt_out, _ = read_word2vec(tmp_path / "t.vec")
    position = {word: k for k, word in enumerate(tgt_out_words)}
    np.testing.assert_allclose(np.linalg.norm(tgt_out, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(mapped, tgt_out[[position["t" + s[1:]] for s in src_words]], atol=1e-5)
