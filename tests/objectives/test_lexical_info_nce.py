import math

import numpy as np
import pytest
import torch

from distalign.objectives.lexical import info_nce


def _naive(a, b, labels, tau):
    """Plain double loop over all ordered pairs of the 2N items."""
    x = np.concatenate([a, b]).astype(np.float64)
    lab = list(labels) + list(labels)
    m = len(lab)

    def s(i, j):
        return float(x[i] @ x[j] / (np.linalg.norm(x[i]) * np.linalg.norm(x[j])))

    terms = []
    for i in range(m):
        for j in range(m):
            if i == j or lab[i] != lab[j]:
                continue
            num = math.exp(s(i, j) / tau)
            den = num + sum(math.exp(s(i, n) / tau) for n in range(m) if lab[n] != lab[i])
            terms.append(-math.log(num / den))
    return sum(terms) / len(terms)


@pytest.mark.parametrize("tau", [0.07, 0.5, 2.0])
@pytest.mark.parametrize("labels", [[0, 1, 2, 3, 4], [3, 1, 3, 3, 7, 1], [5, 6]])
def test_matches_naive_double_loop(labels, tau):
    g = torch.Generator().manual_seed(len(labels))
    a = torch.randn(len(labels), 6, generator=g, dtype=torch.float64)
    b = torch.randn(len(labels), 6, generator=g, dtype=torch.float64)
    got = info_nce(a, b, torch.tensor(labels), temperature=tau)
    assert got.dim() == 0
    assert got.item() == pytest.approx(_naive(a.numpy(), b.numpy(), labels, tau), rel=1e-10)


def test_hand_computed_case():
    e = torch.eye(2)
    # items: a0=e0, a1=e1, b0=e0, b1=e1; each positive has s=1 and two negatives with s=0
    got = info_nce(e, e.clone(), torch.tensor([0, 1]), temperature=1.0)
    assert got.item() == pytest.approx(math.log(1 + 2 / math.e), rel=1e-6)


def test_no_negatives_gives_zero_and_finite_gradient():
    a = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, 4, dtype=torch.float64)
    loss = info_nce(a, b, torch.tensor([2, 2, 2]))
    assert loss.item() == 0.0
    loss.backward()
    assert torch.isfinite(a.grad).all() and a.grad.abs().max() == 0


def test_invariances():
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(6, 5, generator=g), torch.randn(6, 5, generator=g)
    lab = torch.tensor([0, 1, 0, 2, 1, 3])
    base = info_nce(a, b, lab)
    scale = torch.rand(6, 1, generator=g) * 10 + 0.1
    assert torch.allclose(info_nce(a * scale, b / scale, lab), base, atol=1e-5)
    perm = torch.randperm(6, generator=g)
    assert torch.allclose(info_nce(a[perm], b[perm], lab[perm]), base, atol=1e-5)
    assert torch.allclose(info_nce(b, a, lab), base, atol=1e-5)
    # relabelling synsets does not matter, but merging two synsets does
    assert torch.allclose(info_nce(a, b, lab * 10 + 3), base, atol=1e-5)
    assert not torch.allclose(info_nce(a, b, torch.tensor([0, 1, 0, 2, 1, 2])), base, atol=1e-3)


def test_small_temperature_is_stable():
    g = torch.Generator().manual_seed(2)
    a = torch.randn(8, 4, generator=g, requires_grad=True)
    b = torch.randn(8, 4, generator=g)
    loss = info_nce(a, b, torch.arange(8) % 3, temperature=1e-4)
    loss.backward()
    assert torch.isfinite(loss) and loss.item() >= 0
    assert torch.isfinite(a.grad).all()


def test_gradcheck():
    g = torch.Generator().manual_seed(3)
    a = torch.randn(4, 3, generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn(4, 3, generator=g, dtype=torch.float64, requires_grad=True)
    lab = torch.tensor([0, 1, 0, 2])
    assert torch.autograd.gradcheck(lambda x, y: info_nce(x, y, lab, temperature=0.3), (a, b))


def test_errors():
    a = torch.randn(4, 3)
    with pytest.raises(ValueError):
        info_nce(a, torch.randn(5, 3), torch.arange(4))
    with pytest.raises(ValueError):
        info_nce(a, torch.randn(4, 2), torch.arange(4))
    with pytest.raises(ValueError):
        info_nce(a, a, torch.arange(3))
    with pytest.raises(ValueError):
        info_nce(a, a, torch.arange(4), temperature=0.0)
    with pytest.raises(ValueError):
        info_nce(a, a, torch.arange(4), temperature=-1.0)
