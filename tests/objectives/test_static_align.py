import numpy as np
import pytest
import scipy.linalg as sla
import torch

from distalign.objectives.static_align import dcca_loss, mse_loss


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
    assert mse_loss(v, v).item() == 0.0


def test_mse_shape_mismatch():
    with pytest.raises(ValueError):
        mse_loss(torch.zeros(3, 4), torch.zeros(3, 5))
    with pytest.raises(ValueError):
        mse_loss(torch.zeros(3, 4), torch.zeros(4, 4))


# ---------------------------------------------------------------- dcca references

def _ref_regularised(h1, h2, k, r1, r2):
    """The regularised DCCA formula written out with scipy.linalg."""
    n = h1.shape[0]
    H1, H2 = h1 - h1.mean(0), h2 - h2.mean(0)
    S11 = H1.T @ H1 / (n - 1) + r1 * np.eye(h1.shape[1])
    S22 = H2.T @ H2 / (n - 1) + r2 * np.eye(h2.shape[1])
    S12 = H1.T @ H2 / (n - 1)
    T = sla.fractional_matrix_power(S11, -0.5) @ S12 @ sla.fractional_matrix_power(S22, -0.5)
    s = sla.svd(np.real(T), compute_uv=False)
    return -np.sort(s)[::-1][:k].sum()


def _ref_qr_cca(h1, h2, k):
    """Unregularised canonical correlations: singular values of Q1^T Q2 (Bjorck & Golub)."""
    Q1, _ = np.linalg.qr(h1 - h1.mean(0))
    Q2, _ = np.linalg.qr(h2 - h2.mean(0))
    return -np.linalg.svd(Q1.T @ Q2, compute_uv=False)[:k].sum()


def _views(n=40, d1=5, d2=4, seed=0, noise=1.0):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 3))
    h1 = z @ rng.normal(size=(3, d1)) + noise * rng.normal(size=(n, d1)) + 3.0
    h2 = z @ rng.normal(size=(3, d2)) + noise * rng.normal(size=(n, d2)) - 1.0
    return h1, h2


@pytest.mark.parametrize("k", [1, 2, 4])
@pytest.mark.parametrize("r", [(1e-3, 1e-3), (0.5, 2.0)])
def test_dcca_matches_scipy_regularised_formula(k, r):
    h1, h2 = _views()
    got = dcca_loss(torch.from_numpy(h1), torch.from_numpy(h2), k, r1=r[0], r2=r[1])
    assert got.dtype == torch.float64
    assert got.item() == pytest.approx(_ref_regularised(h1, h2, k, *r), rel=1e-9)


@pytest.mark.parametrize("k", [1, 3, 4])
def test_dcca_matches_qr_cca_when_unregularised(k):
    h1, h2 = _views(seed=1)
    got = dcca_loss(torch.from_numpy(h1), torch.from_numpy(h2), k, r1=1e-12, r2=1e-12, eps=1e-15)
    ref = _ref_qr_cca(h1, h2, k)
    assert got.item() == pytest.approx(ref, rel=1e-7)
    assert -k < ref < 0


def test_dcca_perfectly_correlated_views_give_minus_k():
    rng = np.random.default_rng(2)
    h1 = rng.normal(size=(50, 4))
    h2 = np.concatenate([h1 @ rng.normal(size=(4, 4)), rng.normal(size=(50, 2))], 1)  # d2 = 6
    for k in (1, 3, 4):
        got = dcca_loss(torch.from_numpy(h1), torch.from_numpy(h2), k, r1=1e-10, r2=1e-10)
        assert got.item() == pytest.approx(-k, abs=1e-6)
    # with the default regularisation the correlations shrink below 1
    assert -4 < dcca_loss(torch.from_numpy(h1), torch.from_numpy(h2), 4).item() < -3.9


def test_dcca_invariant_to_invertible_linear_maps_when_unregularised():
    h1, h2 = _views(seed=3)
    rng = np.random.default_rng(4)
    A, B = rng.normal(size=(5, 5)), rng.normal(size=(4, 4))
    kw = dict(k=3, r1=1e-12, r2=1e-12, eps=1e-15)
    base = dcca_loss(torch.from_numpy(h1), torch.from_numpy(h2), **kw).item()
    moved = dcca_loss(torch.from_numpy(h1 @ A + 7.0), torch.from_numpy(h2 @ B), **kw).item()
    assert moved == pytest.approx(base, rel=1e-7)
    # ...but the regularised objective is not scale invariant
    big = dcca_loss(torch.from_numpy(1e-2 * h1), torch.from_numpy(h2), k=3, r1=0.1, r2=0.1).item()
    assert abs(big - dcca_loss(torch.from_numpy(h1), torch.from_numpy(h2), k=3, r1=0.1, r2=0.1).item()) > 1e-2


def test_dcca_independent_views_near_zero():
    rng = np.random.default_rng(5)
    h1, h2 = rng.normal(size=(4000, 3)), rng.normal(size=(4000, 2))
    assert -0.1 < dcca_loss(torch.from_numpy(h1), torch.from_numpy(h2), 2).item() < 0


def test_dcca_gradcheck_and_gradients_flow_to_both_views():
    h1, h2 = _views(n=8, d1=3, d2=2, seed=6)
    a = torch.from_numpy(h1).requires_grad_()
    b = torch.from_numpy(h2).requires_grad_()
    assert torch.autograd.gradcheck(lambda x, y: dcca_loss(x, y, 2, r1=1e-2, r2=1e-2), (a, b))
    dcca_loss(a, b, 1).backward()
    assert a.grad.abs().sum() > 0 and b.grad.abs().sum() > 0
    # detaching the static side stops its gradient
    a.grad = None
    b2 = torch.from_numpy(h2).requires_grad_()
    dcca_loss(a, b2.detach(), 1).backward()
    assert b2.grad is None and a.grad.abs().sum() > 0


def test_dcca_gradient_stays_finite_when_covariance_eigenvalues_repeat():
    # dimensions constant over the batch give exactly equal eigenvalues (= r); the gradient of an
    # eigendecomposition divides by their gap (0), which made the tiny DCCA run diverge at step 3
    g = torch.Generator().manual_seed(0)
    h = torch.randn(32, 16, generator=g)
    h[:, :3] = 0.5
    v = torch.randn(32, 16, generator=g)
    x = h.clone().requires_grad_()
    loss = dcca_loss(x, v, 4)
    loss.backward()
    assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
    assert loss.item() == pytest.approx(_ref_regularised(h.double().numpy(), v.double().numpy(), 4, 1e-3, 1e-3),
                                        rel=1e-6)


def test_dcca_float32_in_float32_out_computed_in_float64():
    h1, h2 = _views(seed=7)
    x = torch.from_numpy(h1).float().requires_grad_()
    y = torch.from_numpy(h2).float()
    got = dcca_loss(x, y, 3)
    assert got.dtype == torch.float32
    ref = _ref_regularised(x.detach().double().numpy(), y.double().numpy(), 3, 1e-3, 1e-3)
    assert got.item() == pytest.approx(ref, rel=1e-6)
    got.backward()
    assert x.grad.dtype == torch.float32 and torch.isfinite(x.grad).all()


def test_dcca_errors():
    x, y = torch.randn(10, 3), torch.randn(10, 4)
    with pytest.raises(ValueError):
        dcca_loss(x, y, 4)  # k > min(d1, d2)
    with pytest.raises(ValueError):
        dcca_loss(x, y, 0)
    with pytest.raises(ValueError):
        dcca_loss(x[:1], y[:1], 1)  # N < 2
    with pytest.raises(ValueError):
        dcca_loss(x, y[:9], 1)  # N mismatch
    with pytest.raises(ValueError):
        dcca_loss(x[0], y, 1)  # not 2-D
