"""VecMap (Artetxe et al. 2018): each step against a hand computation, self-learning on a planted
permutation, the method switch in files, the CLI and the typed config."""

import subprocess
import sys
from typing import get_args, get_type_hints

import numpy as np
import pytest
from scipy.linalg import orthogonal_procrustes
from scipy.stats import ortho_group

from distalign.objectives.static_align import StaticAlignConfig
from distalign.static.mapping import MAPPING_METHODS, align_files, map_spaces
from distalign.static.procrustes import normalize_embeddings
from distalign.static.vecmap import (
    VecMapSettings,
    apply_vecmap,
    fit_vecmap,
    induce_dictionary,
    orthogonal_mapping,
    vecmap_align,
    whitening_transform,
)
from distalign.static.word2vec_format import read_word2vec, write_word2vec

STEPS_OFF = dict(whiten=False, src_reweight=0.0, trg_reweight=0.0, src_dewhiten="none", trg_dewhiten="none")


def test_whitening_hand_computed_and_decorrelates():
    # M^T M = diag(4, 9): (M^T M)^{-1/2} = diag(1/2, 1/3).
    np.testing.assert_allclose(
        whitening_transform(np.array([[2.0, 0.0], [0.0, 3.0]])), np.diag([0.5, 1 / 3]), atol=1e-12
    )
    m = np.random.default_rng(0).normal(size=(30, 4)) @ np.array(
        [[3, 1, 0, 0], [0, 1, 0, 0], [0, 0, 2, 1], [1, 0, 0, 0.5]]
    )
    w = whitening_transform(m)
    np.testing.assert_allclose((m @ w).T @ (m @ w), np.eye(4), atol=1e-10)
    np.testing.assert_allclose(w, w.T, atol=1e-12)  # the symmetric (ZCA) root VecMap uses
    with pytest.raises(ValueError, match="4 linearly independent dictionary rows"):
        whitening_transform(m[:3])


def test_orthogonal_mapping_equals_the_procrustes_svd_solution_on_3x3():
    xw = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 1.0], [1.0, 0.0, 3.0]])
    zw = np.array([[0.0, 1.0, 2.0], [1.0, 1.0, 0.0], [2.0, 0.0, 1.0]])
    u, s, v = orthogonal_mapping(xw, zw)
    np.testing.assert_allclose(u @ v.T, orthogonal_procrustes(xw, zw)[0], atol=1e-12)
    np.testing.assert_allclose(u @ np.diag(s) @ v.T, xw.T @ zw, atol=1e-12)
    # With every other step off, the source map is U and the target map V.
    wx, wz = fit_vecmap(xw, zw, VecMapSettings(**STEPS_OFF))
    np.testing.assert_allclose(wx, u, atol=1e-12)
    np.testing.assert_allclose(wz, v, atol=1e-12)


def test_reweighting_hand_computed():
    # x^T z = diag(4, 1): U = V = I, S = (4, 1); p_src = 0.5 gives W_x = diag(2, 1), p_trg = 1 gives W_z = diag(4, 1).
    x, z = np.diag([4.0, 1.0]), np.eye(2)
    wx, wz = fit_vecmap(x, z, VecMapSettings(**{**STEPS_OFF, "src_reweight": 0.5, "trg_reweight": 1.0}))
    np.testing.assert_allclose(np.abs(wx), np.diag([2.0, 1.0]), atol=1e-12)  # svd may flip both signs of a column
    np.testing.assert_allclose(np.abs(wz), np.diag([4.0, 1.0]), atol=1e-12)
    # x W_x = diag(8, 1), z W_z = diag(4, 1): the sign flips cancel in their product
    np.testing.assert_allclose(x @ wx @ (z @ wz).T, np.diag([32.0, 1.0]), atol=1e-12)


def test_dewhitening_restores_each_side_own_whitening_inverse():
    rng = np.random.default_rng(1)
    x, z = rng.normal(size=(40, 3)) * [3.0, 1.0, 0.2], rng.normal(size=(40, 3)) * [0.5, 2.0, 1.0]
    wx1, wz1 = whitening_transform(x), whitening_transform(z)
    u, _, v = orthogonal_mapping(x @ wx1, z @ wz1)
    settings = dict(whiten=True, src_reweight=0.0, trg_reweight=0.0)
    wx, wz = fit_vecmap(x, z, VecMapSettings(**settings, src_dewhiten="src", trg_dewhiten="trg"))
    # W_x1 U (U^T W_x1^{-1} U) = U: whitening undone, only the orthogonal map is left (Gram matrices kept).
    np.testing.assert_allclose(wx, u, atol=1e-10)
    np.testing.assert_allclose(wz, v, atol=1e-10)
    np.testing.assert_allclose((x @ wx) @ (x @ wx).T, x @ x.T, atol=1e-9)
    # De-whitened with the other side's inverse instead: W_x = W_x1 U V^T W_z1^{-1} V.
    wx, wz = fit_vecmap(x, z, VecMapSettings(**settings, src_dewhiten="trg", trg_dewhiten="src"))
    np.testing.assert_allclose(wx, wx1 @ u @ v.T @ np.linalg.inv(wz1) @ v, atol=1e-10)
    np.testing.assert_allclose(wz, wz1 @ v @ u.T @ np.linalg.inv(wx1) @ u, atol=1e-10)


def test_default_steps_map_a_planted_rotation_exactly():
    rng = np.random.default_rng(2)
    z = rng.normal(size=(50, 5)) * np.geomspace(2.0, 0.2, 5)
    q = ortho_group.rvs(5, random_state=2)
    x = z @ q.T  # source row i translates target row i
    wx, wz = fit_vecmap(x, z)
    np.testing.assert_allclose(x @ wx, z @ wz, atol=1e-9)


def test_induce_dictionary_hand_computed():
    # Dot products [[0.9, 0.1], [0.8, 0.75]]. Plain: forward 0->0, 1->0; backward 0->0, 1->1.
    xw, zw = np.array([[0.9, 0.1], [0.8, 0.75]]), np.eye(2)
    pairs, objective = induce_dictionary(xw, zw, csls_k=0)
    assert pairs == {(0, 0), (1, 0), (1, 1)}
    assert objective == pytest.approx(((0.9 + 0.8) / 2 + (0.9 + 0.75) / 2) / 2)
    # CSLS with k = 1: target 0 is a hub (r = 0.9): source 1 scores 0.8 - 0.45 for it, 0.75 - 0.375 for target 1.
    pairs, _ = induce_dictionary(xw, zw, csls_k=1)
    assert pairs == {(0, 0), (1, 1)}


def _permuted_spaces(n=300, d=8, seed=3):
    """Target = rotated source with rows shuffled: target row k translates source row order[k]."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) * np.geomspace(1.0, 0.2, d)
    order = rng.permutation(n)
    z = (x @ ortho_group.rvs(d, random_state=seed))[order]
    return [f"s{i}" for i in range(n)], x, [f"t{i}" for i in order], z


def test_self_learning_recovers_a_planted_permutation():
    src_words, x, tgt_words, z = _permuted_spaces()
    seed = [(f"s{i}", f"t{i}") for i in range(8)]  # one pair per dimension: the least whitening needs
    settings = VecMapSettings(self_learning=True, vocabulary_cutoff=300)
    wx, wz, report = vecmap_align(src_words, x, tgt_words, z, seed, settings)
    assert report["converged"] and report["dictionary_sizes"][0] == 8 and report["iterations_run"] >= 2
    induced, _ = induce_dictionary(apply_vecmap(x, wx), apply_vecmap(z, wz), settings.csls_k)
    assert induced == {(int(w[1:]), j) for j, w in enumerate(tgt_words)}  # every word, and only its translation
    _, _, seed_only = vecmap_align(src_words, x, tgt_words, z, seed)
    assert seed_only["iterations_run"] == 0 and seed_only["dictionary_sizes"] == [8]


def test_map_spaces_keep_target_leaves_the_pivot_normalised():
    src_words, x, tgt_words, z = _permuted_spaces(n=60, d=4, seed=4)
    seed = [(f"s{i}", f"t{i}") for i in range(60)]
    mapped, pivot, _ = map_spaces("vecmap", src_words, x, tgt_words, z, seed, keep_target=True)
    np.testing.assert_allclose(pivot, normalize_embeddings(z), atol=1e-12)
    position = {w: k for k, w in enumerate(tgt_words)}
    np.testing.assert_allclose(mapped, pivot[[position[f"t{i}"] for i in range(60)]], atol=1e-8)
    with pytest.raises(ValueError, match="unknown mapping method 'cca'"):
        map_spaces("cca", src_words, x, tgt_words, z, seed)


def test_method_switch_in_files_cli_and_config(tmp_path):
    src_words, x, tgt_words, z = _permuted_spaces(n=40, d=4, seed=5)
    write_word2vec(tmp_path / "src.vec", src_words, x)
    write_word2vec(tmp_path / "tgt.vec", tgt_words, z)
    (tmp_path / "dict.tsv").write_text("".join(f"s{i}\tt{i}\n" for i in range(10)), encoding="utf-8")
    with pytest.raises(ValueError, match="--tgt-out"):
        align_files(
            tmp_path / "src.vec", tmp_path / "tgt.vec", tmp_path / "dict.tsv", tmp_path / "o.vec", method="vecmap"
        )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "distalign.cli",
            "static",
            "align",
            "--method",
            "vecmap",
            "--src",
            str(tmp_path / "src.vec"),
            "--tgt",
            str(tmp_path / "tgt.vec"),
            "--dictionary",
            str(tmp_path / "dict.tsv"),
            "--out",
            str(tmp_path / "s.vec"),
            "--tgt-out",
            str(tmp_path / "t.vec"),
        ],
        check=True,
        capture_output=True,
    )
    _, mapped, _ = read_word2vec(tmp_path / "s.vec")
    tgt_out_words, tgt_out, _ = read_word2vec(tmp_path / "t.vec")
    position = {w: k for k, w in enumerate(tgt_out_words)}
    np.testing.assert_allclose(mapped, tgt_out[[position["t" + w[1:]] for w in src_words]], atol=1e-5)
    assert tgt_out_words == tgt_words
    assert np.abs(tgt_out - normalize_embeddings(z)).max() > 0.1  # VecMap moved the target space too
    assert get_args(get_type_hints(StaticAlignConfig)["mapping"]) == MAPPING_METHODS == ("procrustes", "vecmap")


def test_config_validates_the_mapping():
    from distalign.config import ConfigError, load_config

    assert load_config(None, ["objectives.static.mapping=vecmap"]).objectives.static.mapping == "vecmap"
    with pytest.raises(ConfigError, match=r"objectives.static.mapping: 'cca' is not one of \['procrustes', 'vecmap'\]"):
        load_config(None, ["objectives.static.mapping=cca"])
