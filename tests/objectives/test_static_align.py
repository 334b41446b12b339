import logging
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.linalg as sla
import torch

from distalign.config import ExperimentConfig, load_dataclass
from distalign.data.sources import StaticVectorsSource
from distalign.objectives.static_align import (
    StaticAlignObjective,
    _LeadingSingular,
    dcca_forced_correlations,
    dcca_loss,
    mse_loss,
)
from distalign.preparation.static_targets import read_static_targets
from distalign.static.word2vec_format import write_word2vec

# ---------------------------------------------------------------- mse


def test_mse_matches_numpy_and_gradient():
    g = torch.Generator().manual_seed(0)
    h = torch.randn(7, 5, generator=g, dtype=torch.float64, requires_grad=True)
    v = torch.randn(7, 5, generator=g, dtype=torch.float64)
    loss = mse_loss(h, v)
    assert loss.dim() == 0
    assert loss.item() == pytest.approx(np.mean((h.detach().numpy() - v.numpy()) ** 2), rel=1e-12)
    loss.backward()
    assert torch.allclose(h.grad, 2 * (h.detach() - v) / h.numel())


def test_mse_by_hand():
    h = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    v = torch.tensor([[0.0, 2.0], [5.0, 1.0]])
    assert mse_loss(h, v).item() == 3.5  # differences 1, 0, -2, 3: (1 + 0 + 4 + 9) / 4


def test_mse_shape_mismatch():
    with pytest.raises(ValueError):
        mse_loss(torch.zeros(3, 4), torch.zeros(3, 5))
    with pytest.raises(ValueError):
        mse_loss(torch.zeros(3, 4), torch.zeros(4, 4))


# ---------------------------------------------------------------- dcca (two-view DGCCA) references


def _ref_dgcca(h1, h2, k, eps=1e-8):
    """The authors' dgcca_loss (continued_pretraining/DGCCA.py) in numpy, with columns centred."""
    columns = []
    for h in (h1, h2):
        A, s, _ = np.linalg.svd(h - h.mean(0), full_matrices=False)
        t2 = s[:k] * (1.0 / (s[:k] * s[:k] + eps)) * s[:k]
        columns.append(A[:, :k] * np.sqrt(np.where(t2 > eps, t2, eps)))
    return -np.linalg.svd(np.concatenate(columns, 1), compute_uv=False)[:k].sum()


def _ref_principal_angles(h1, h2, k):
    """-sum sqrt(1 + cos theta_i) over the principal angles between the top-k principal-component spans."""
    spans = [np.linalg.svd(h - h.mean(0), full_matrices=False)[0][:, :k] for h in (h1, h2)]
    return -np.sqrt(1 + np.cos(sla.subspace_angles(*spans))).sum()


def _views(n=40, d1=5, d2=4, seed=0, noise=1.0):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 3))
    h1 = z @ rng.normal(size=(3, d1)) + noise * rng.normal(size=(n, d1)) + 3.0
    h2 = z @ rng.normal(size=(3, d2)) + noise * rng.normal(size=(n, d2)) - 1.0
    return h1, h2


def test_dcca_by_hand_one_direction():
    # centred columns u = (1, -1, 0, 0), w = (1, 0, -1, 0): cos = 1 / 2, singular value of [u t, w t] is t sqrt(3 / 2)
    u = torch.tensor([[1.0], [-1.0], [0.0], [0.0]], dtype=torch.float64)
    w = torch.tensor([[1.0], [0.0], [-1.0], [0.0]], dtype=torch.float64)
    t = np.sqrt(2 / (2 + 1e-8))  # s = |u| = sqrt(2)
    assert dcca_loss(u, w, 1).item() == pytest.approx(-t * np.sqrt(1.5), rel=1e-12)
    # -3u + 5 spans the same direction: [u t, -u t'] has singular values sqrt(t^2 + t'^2) and 0
    assert dcca_loss(u, -3 * u + 5, 1).item() == pytest.approx(-np.sqrt(t**2 + 18 / (18 + 1e-8)), rel=1e-12)


@pytest.mark.parametrize("k", [1, 2, 4])
@pytest.mark.parametrize("shape", [(40, 5, 4), (12, 30, 20), (9, 8, 8)])  # N > d, N < d (theirs: 64 x 768), N ~ d
def test_dcca_matches_numpy_dgcca_and_principal_angles(k, shape):
    h1, h2 = _views(*shape)
    got = dcca_loss(torch.from_numpy(h1), torch.from_numpy(h2), k)
    assert got.dtype == torch.float64
    assert got.item() == pytest.approx(_ref_dgcca(h1, h2, k), rel=1e-10)
    unscaled = dcca_loss(torch.from_numpy(h1), torch.from_numpy(h2), k, eps=0.0)  # t = 1
    assert unscaled.item() == pytest.approx(_ref_principal_angles(h1, h2, k), rel=1e-10)
    assert -k * np.sqrt(2) < unscaled.item() < -k


def test_dcca_shared_principal_subspace_gives_minus_k_sqrt2():
    rng = np.random.default_rng(2)
    h1 = rng.normal(size=(50, 4)) * [5, 4, 3, 0.1]
    R = np.linalg.qr(rng.normal(size=(6, 6)))[0][:4]  # orthonormal rows: h2 h2^T = 100 h1 h1^T
    h2 = 10 * h1 @ R - 2.0  # d2 = 6
    for k in (1, 2, 3, 4):
        got = dcca_loss(torch.from_numpy(h1), torch.from_numpy(h2), k, eps=0.0)
        assert got.item() == pytest.approx(-k * np.sqrt(2), rel=1e-10)


def test_dcca_invariant_to_translation_rotation_and_scale_not_to_linear_maps():
    h1, h2 = _views(seed=3)
    base = dcca_loss(torch.from_numpy(h1), torch.from_numpy(h2), 3, eps=0.0).item()
    Q = np.linalg.qr(np.random.default_rng(4).normal(size=(5, 5)))[0]
    moved = dcca_loss(torch.from_numpy(2.5 * h1 @ Q + 7.0), torch.from_numpy(h2 - 4.0), 3, eps=0.0).item()
    assert moved == pytest.approx(base, rel=1e-10)
    # the principal directions, unlike CCA's, depend on each dimension's scale
    top = dcca_loss(torch.from_numpy(h1), torch.from_numpy(h2), 1, eps=0.0).item()
    stretched = dcca_loss(torch.from_numpy(h1 * [100, 1, 1, 1, 1]), torch.from_numpy(h2), 1, eps=0.0).item()
    assert abs(stretched - top) > 0.1


def test_dcca_independent_views_near_minus_k():
    rng = np.random.default_rng(5)
    h1, h2 = rng.normal(size=(4000, 3)), rng.normal(size=(4000, 2))
    assert -2.05 < dcca_loss(torch.from_numpy(h1), torch.from_numpy(h2), 2).item() < -2


def _latent_views(n, d1, d2, related, seed):
    """Views with 10 dominant latent directions plus unit noise; related views share the latent factors."""
    g = torch.Generator().manual_seed(seed)
    z1 = 3 * torch.randn(n, 10, generator=g, dtype=torch.float64)
    z2 = z1 if related else 3 * torch.randn(n, 10, generator=g, dtype=torch.float64)
    h = z1 @ torch.randn(10, d1, generator=g, dtype=torch.float64) + torch.randn(
        n, d1, generator=g, dtype=torch.float64
    )
    v = z2 @ torch.randn(10, d2, generator=g, dtype=torch.float64) + torch.randn(
        n, d2, generator=g, dtype=torch.float64
    )
    return h, v


@pytest.mark.parametrize("d2", [768, 300])  # X2S-MA and fastText targets
def test_dcca_separates_related_from_independent_views_in_shipped_shape(d2):
    # N - 1 = 1023 < d1 + d2: CCA of the full views has correlations of 1 for any views (the old loss scored
    # -10.00 vs -9.99 here); DGCCA's 2k = 20 leading directions fit in the batch
    n, d1, k = 1024, 768, 10
    assert n - 1 < d1 + d2 and dcca_forced_correlations(n, k) == 0
    related = dcca_loss(*_latent_views(n, d1, d2, True, seed=0), k).item()
    independent = dcca_loss(*_latent_views(n, d1, d2, False, seed=1), k).item()
    assert related < independent - 3
    assert related == pytest.approx(-k * np.sqrt(2), abs=0.05) and independent > -11


def test_dcca_forced_correlations_when_2k_exceeds_n_minus_1():
    assert [dcca_forced_correlations(n, 10) for n in (1024, 64, 21, 20, 16, 11)] == [0, 0, 0, 1, 5, 10]
    rng = np.random.default_rng(8)
    h1, h2 = rng.normal(size=(8, 6)), rng.normal(size=(8, 6))  # k = 5: 10 directions in 7 centred dimensions
    sv = np.linalg.svd(np.concatenate([np.linalg.svd(h - h.mean(0))[0][:, :5] for h in (h1, h2)], 1), compute_uv=False)
    assert np.allclose(sv[: dcca_forced_correlations(8, 5)], np.sqrt(2))
    assert dcca_loss(torch.from_numpy(h1), torch.from_numpy(h2), 5, eps=0.0).item() < -3 * np.sqrt(2) - 2


def test_leading_singular_backward_matches_torch_svd():
    g = torch.Generator().manual_seed(9)
    for shape in ((12, 5), (5, 12)):
        H = torch.randn(*shape, generator=g, dtype=torch.float64, requires_grad=True)
        W, w = (
            torch.randn(shape[0], 3, generator=g, dtype=torch.float64),
            torch.randn(3, generator=g, dtype=torch.float64),
        )

        def f(A, s):  # sign-invariant, as the loss is
            return ((A @ A.T) * (W @ W.T)).sum() + (s * w).sum()  # noqa: B023 (called within this iteration)

        (ours,) = torch.autograd.grad(f(*_LeadingSingular.apply(H, 3)), H)
        U, S, _ = torch.linalg.svd(H, full_matrices=False)
        (ref,) = torch.autograd.grad(f(U[:, :3], S[:3]), H)
        assert torch.allclose(ours, ref, atol=1e-12)


def test_dcca_gradcheck_and_gradients_flow_to_both_views():
    h1, h2 = _views(n=8, d1=3, d2=2, seed=6)
    a = torch.from_numpy(h1).requires_grad_()
    b = torch.from_numpy(h2).requires_grad_()
    assert torch.autograd.gradcheck(lambda x, y: dcca_loss(x, y, 2), (a, b))
    dcca_loss(a, b, 1).backward()
    assert a.grad.abs().sum() > 0 and b.grad.abs().sum() > 0
    # detaching the static side stops its gradient
    a.grad = None
    b2 = torch.from_numpy(h2).requires_grad_()
    dcca_loss(a, b2.detach(), 1).backward()
    assert b2.grad is None and a.grad.abs().sum() > 0


def test_dcca_gradient_stays_finite_when_singular_values_repeat():
    # dimensions constant over the batch give repeated zero singular values; torch's SVD backward divides
    # by their gap (0), as the eigh-based version that made the tiny DCCA run diverge at step 3 did
    g = torch.Generator().manual_seed(0)
    h = torch.randn(32, 16, generator=g)
    h[:, :3] = 0.5
    v = torch.randn(32, 16, generator=g)
    x = h.clone().requires_grad_()
    loss = dcca_loss(x, v, 4)
    loss.backward()
    assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
    assert loss.item() == pytest.approx(_ref_dgcca(h.double().numpy(), v.double().numpy(), 4), rel=1e-6)


def test_dcca_float32_in_float32_out_computed_in_float64():
    h1, h2 = _views(seed=7)
    x = torch.from_numpy(h1).float().requires_grad_()
    y = torch.from_numpy(h2).float()
    got = dcca_loss(x, y, 3)
    assert got.dtype == torch.float32
    assert got.item() == pytest.approx(_ref_dgcca(x.detach().double().numpy(), y.double().numpy(), 3), rel=1e-6)
    got.backward()
    assert x.grad.dtype == torch.float32 and torch.isfinite(x.grad).all()


def test_dcca_errors():
    x, y = torch.randn(10, 3), torch.randn(10, 4)
    with pytest.raises(ValueError):
        dcca_loss(x, y, 4)  # k > min(d1, d2)
    with pytest.raises(ValueError):
        dcca_loss(x, y, 0)
    with pytest.raises(ValueError):
        dcca_loss(x[:3], y[:3], 3)  # k > N - 1
    with pytest.raises(ValueError):
        dcca_loss(x, y[:9], 1)  # N mismatch
    with pytest.raises(ValueError):
        dcca_loss(x[0], y, 1)  # not 2-D


# ---------------------------------------------------------------- the degenerate-batch warning


@pytest.mark.parametrize(
    "batch, k, warns", [(16, 10, True), (20, 10, True), (21, 10, False), (64, 10, False), (1024, 10, False)]
)
def test_static_targets_warn_when_dcca_batch_is_degenerate(tmp_path, caplog, batch, k, warns):
    from transformers import BertConfig

    BertConfig(hidden_size=8, num_attention_heads=2).save_pretrained(tmp_path / "model")
    rng = np.random.default_rng(0)
    path = write_word2vec(tmp_path / "en.vec", [f"w{i}" for i in range(batch)], rng.normal(size=(batch, 8)))
    config = load_dataclass(
        ExperimentConfig,
        None,
        [
            "objectives.static.loss=dcca",
            f"objectives.static.dcca_k={k}",
            f"train.batch_sizes.static={batch}",
            "train.num_workers=1",
        ],
    )
    with caplog.at_level(logging.WARNING, logger="distalign"):
        read_static_targets(config, [StaticVectorsSource(str(path), "en")], set(), [], str(tmp_path / "model"))
    messages = [r.getMessage() for r in caplog.records if "objectives.static.dcca_k" in r.getMessage()]
    assert len(messages) == int(warns)
    if warns:
        assert f"train.batch_sizes.static={batch} " in messages[0]
        assert f"{dcca_forced_correlations(batch, k)} of Deep CCA's {k} correlations" in messages[0]


# ---------------------------------------------------------------- the objective


@pytest.mark.parametrize("loss", ["mse", "dcca"])
def test_the_objective_computes_the_configured_loss_on_the_encoded_words(loss):
    # (a real run of the shipped static config trains with mse: tests/train/test_tiny_configs.py)
    config = load_dataclass(ExperimentConfig, None, [f"objectives.static.loss={loss}", "objectives.static.dcca_k=3"])
    objective = StaticAlignObjective.build(config.objectives.static, None)
    rng = np.random.default_rng(0)
    h, v = (torch.from_numpy(rng.normal(size=(12, 4)).astype(np.float32)) for _ in range(2))
    seen = []
    model = SimpleNamespace(encode_words=lambda *tensors: seen.append(tensors) or h)
    batch = {
        "input_ids": torch.ones(12, 3, dtype=torch.long),
        "attention_mask": torch.ones(12, 3, dtype=torch.long),
        "word_mask": torch.ones(12, 3),
        "vector": v,
    }
    expected = mse_loss(h, v) if loss == "mse" else dcca_loss(h, v, 3)
    assert objective(model, batch).item() == pytest.approx(expected.item(), rel=1e-6)
    assert seen and seen[0][0] is batch["input_ids"] and seen[0][2] is batch["word_mask"]
