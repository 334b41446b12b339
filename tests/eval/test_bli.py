"""BLI metrics vs. naive loop implementations and hand-computed cases."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from distalign.eval.bli_metrics import gold_ranks, mrr, precision_at_k, ranking_metrics
from distalign.similarity import similarity_matrix


# ---------------------------------------------------------------- naive references
def naive_cos(src, tgt):
    src, tgt = np.asarray(src, dtype=np.float64), np.asarray(tgt, dtype=np.float64)
    out = np.zeros((len(src), len(tgt)))
    for i, x in enumerate(src):
        for j, y in enumerate(tgt):
            out[i, j] = float(np.dot(x, y)) / (math.sqrt(np.dot(x, x)) * math.sqrt(np.dot(y, y)))
    return out


def naive_csls(src, tgt, k):
    cos = naive_cos(src, tgt)
    n, m = cos.shape
    r_t = [np.mean(sorted(cos[i, :], reverse=True)[:k]) for i in range(n)]  # x's k nearest targets
    r_s = [np.mean(sorted(cos[:, j], reverse=True)[:k]) for j in range(m)]  # y's k nearest sources
    out = np.zeros((n, m))
    for i in range(n):
        for j in range(m):
            out[i, j] = 2 * cos[i, j] - r_t[i] - r_s[j]
    return out


def naive_scores(src, tgt, similarity, k):
    return naive_cos(src, tgt) if similarity == "cosine" else naive_csls(src, tgt, k)


def naive_ranks(scores, gold):
    """Sort each query's candidates (score desc, gold last among equal scores); rank of the first gold."""
    ranks = []
    for row, g in zip(scores, gold):
        g = set(g)
        order = sorted(range(len(row)), key=lambda j: (-row[j], j in g))
        ranks.append(next(pos for pos, j in enumerate(order, start=1) if j in g))
    return ranks


def random_case(seed, n=7, m=23, d=5):
    rng = np.random.default_rng(seed)
    src = torch.from_numpy(rng.normal(size=(n, d)))
    tgt = torch.from_numpy(rng.normal(size=(m, d)))
    gold = [list(rng.choice(m, size=rng.integers(1, 4), replace=False)) for _ in range(n)]
    return src, tgt, gold


SEEDS = range(5)
SIM_K = [("cosine", 10), ("csls", 1), ("csls", 3), ("csls", 10), ("csls", 50)]


# ---------------------------------------------------------------- random inputs vs naive
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("similarity,k", SIM_K)
def test_similarity_matrix_matches_naive(seed, similarity, k):
    src, tgt, _ = random_case(seed)
    got = similarity_matrix(src, tgt, similarity=similarity, k=k)
    assert got.shape == (7, 23)
    np.testing.assert_allclose(got.numpy(), naive_scores(src, tgt, similarity, k), atol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("similarity,k", SIM_K)
def test_ranks_mrr_precision_match_naive(seed, similarity, k):
    src, tgt, gold = random_case(seed)
    expected = naive_ranks(naive_scores(src, tgt, similarity, k), gold)
    ranks = gold_ranks(src, tgt, gold, similarity=similarity, k=k)
    assert ranks.dtype == torch.long
    assert ranks.tolist() == expected
    assert mrr(src, tgt, gold, similarity=similarity, k=k) == pytest.approx(np.mean([1 / r for r in expected]))
    p = precision_at_k(src, tgt, gold, k_values=(1, 2, 5, 10), similarity=similarity, csls_k=k)
    assert p == pytest.approx({c: np.mean([r <= c for r in expected]) for c in (1, 2, 5, 10)})


@pytest.mark.parametrize("similarity", ["cosine", "csls"])
@pytest.mark.parametrize("chunk_size", [1, 3, 6])
def test_chunking_does_not_change_results(similarity, chunk_size):
    src, tgt, gold = random_case(11, n=10, m=9)
    full = similarity_matrix(src, tgt, similarity, k=4)
    torch.testing.assert_close(similarity_matrix(src, tgt, similarity, k=4, chunk_size=chunk_size), full)
    assert torch.equal(
        gold_ranks(src, tgt, gold, similarity, k=4, chunk_size=chunk_size), gold_ranks(src, tgt, gold, similarity, k=4)
    )


def test_csls_k_clipped_to_available_rows():
    src, tgt, gold = random_case(3, n=4, m=6)
    # k=100 means "all rows" on both sides: r_T averages 6 targets, r_S averages 4 sources.
    torch.testing.assert_close(similarity_matrix(src, tgt, "csls", k=100), torch.from_numpy(naive_csls(src, tgt, 6)))
    cos = naive_cos(src, tgt)
    expected = 2 * cos - cos.mean(axis=1, keepdims=True) - cos.mean(axis=0, keepdims=True)
    np.testing.assert_allclose(similarity_matrix(src, tgt, "csls", k=100).numpy(), expected, atol=1e-12)


# ---------------------------------------------------------------- hand-computed cases
# 3 words in 2-D. Queries q0=[1,0], q1=[0,1], q2=[1,1]; targets t0=[1,0], t1=[0,1], t2=[1,1].
HAND_SRC = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
HAND_TGT = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
HAND_GOLD = [[1], [1], [0]]
# q0 -> gold t1 (cos 0): t0 (1) and t2 (.707) are better -> rank 3
# q1 -> gold t1 (cos 1): rank 1
# q2 -> gold t0 (cos .707): t2 (1) better, t1 (.707) ties and counts against the gold -> rank 3


def test_hand_cosine_ranks_mrr_precision():
    assert gold_ranks(HAND_SRC, HAND_TGT, HAND_GOLD).tolist() == [3, 1, 3]
    assert mrr(HAND_SRC, HAND_TGT, HAND_GOLD) == pytest.approx((1 / 3 + 1 + 1 / 3) / 3)  # 5/9
    assert precision_at_k(HAND_SRC, HAND_TGT, HAND_GOLD, k_values=(1, 2, 3)) == pytest.approx(
        {1: 1 / 3, 2: 1 / 3, 3: 1.0}
    )
    assert precision_at_k(HAND_SRC, HAND_TGT, HAND_GOLD) == pytest.approx({1: 1 / 3, 5: 1.0, 10: 1.0})


# Hubness example: s0=[1,0], s1=[.6,.8]; t0=[.8,.6] (a hub), t1=[0,1] (given unnormalised).
# cos = [[.8, 0], [.96, .8]]
# k=2: r_T = [.4, .88], r_S = [.88, .4] -> csls = [[.32, -.8], [.16, .32]]
# k=1: r_T = [.8, .96], r_S = [.96, .8] -> csls = [[-.16, -1.6], [0, -.16]]
HUB_SRC = torch.tensor([[2.0, 0.0], [3.0, 4.0]], dtype=torch.float64)
HUB_TGT = torch.tensor([[8.0, 6.0], [0.0, 0.5]], dtype=torch.float64)
HUB_GOLD = [[0], [1]]


def test_hand_csls_matrix():
    cos = torch.tensor([[0.8, 0.0], [0.96, 0.8]], dtype=torch.float64)
    torch.testing.assert_close(similarity_matrix(HUB_SRC, HUB_TGT), cos)
    k2 = torch.tensor([[0.32, -0.8], [0.16, 0.32]], dtype=torch.float64)
    torch.testing.assert_close(similarity_matrix(HUB_SRC, HUB_TGT, "csls", k=2), k2)
    torch.testing.assert_close(similarity_matrix(HUB_SRC, HUB_TGT, "csls", k=10), k2)  # clipped to 2
    k1 = torch.tensor([[-0.16, -1.6], [0.0, -0.16]], dtype=torch.float64)
    torch.testing.assert_close(similarity_matrix(HUB_SRC, HUB_TGT, "csls", k=1), k1)


def test_hand_csls_fixes_hub():
    # cosine: s1 prefers the hub t0 over its gold t1 -> rank 2; CSLS(k=2) penalises the hub -> rank 1.
    assert gold_ranks(HUB_SRC, HUB_TGT, HUB_GOLD).tolist() == [1, 2]
    assert mrr(HUB_SRC, HUB_TGT, HUB_GOLD, similarity="cosine") == pytest.approx(0.75)
    assert gold_ranks(HUB_SRC, HUB_TGT, HUB_GOLD, similarity="csls", k=2).tolist() == [1, 1]
    assert mrr(HUB_SRC, HUB_TGT, HUB_GOLD, similarity="csls", k=2) == pytest.approx(1.0)
    assert mrr(HUB_SRC, HUB_TGT, HUB_GOLD, similarity="csls", k=1) == pytest.approx(0.75)
    assert precision_at_k(HUB_SRC, HUB_TGT, HUB_GOLD, k_values=(1,), similarity="csls", csls_k=2) == {1: 1.0}
    assert precision_at_k(HUB_SRC, HUB_TGT, HUB_GOLD, k_values=(1,), similarity="csls", csls_k=1) == {1: 0.5}


# Duplicate target vectors: t0, t2, t3 all point along [1,0]; t1 = [0,1].
DUP_TGT = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [2.0, 0.0]])
DUP_Q = torch.tensor([[1.0, 0.0]])


@pytest.mark.parametrize("similarity", ["cosine", "csls"])
def test_ties_with_duplicate_targets_count_against_gold(similarity):
    # Gold t0 ties with non-gold duplicates t2, t3: both rank above it (pessimistic ties).
    assert gold_ranks(DUP_Q, DUP_TGT, [[0]], similarity).tolist() == [3]
    assert gold_ranks(DUP_Q, DUP_TGT, [[3]], similarity).tolist() == [3]
    # Tied candidates that are themselves gold do not count.
    assert gold_ranks(DUP_Q, DUP_TGT, [[0, 2, 3]], similarity).tolist() == [1]
    # Gold t1: three strictly better candidates (the duplicates each count).
    assert gold_ranks(DUP_Q, DUP_TGT, [[1]], similarity).tolist() == [4]
    assert mrr(DUP_Q, DUP_TGT, [[1]], similarity) == pytest.approx(0.25)


def test_multiple_gold_translations_use_best():
    # q2=[1,1]: gold {t0 (.707), t2 (1)} -> best gold is t2 -> rank 1; {t0, t1} -> rank 2.
    q = HAND_SRC[2:]
    assert gold_ranks(q, HAND_TGT, [[0, 2]]).tolist() == [1]
    assert gold_ranks(q, HAND_TGT, [[0, 1]]).tolist() == [2]
    # Gold {t1, t2} for the duplicate case: best gold t2 ties non-gold t0 and t3 -> rank 3.
    assert gold_ranks(DUP_Q, DUP_TGT, [{1, 2}]).tolist() == [3]
    assert mrr(HAND_SRC, HAND_TGT, [[1, 0], [1], [0, 2]]) == pytest.approx(1.0)


def test_collapsed_encoder_scores_near_zero():
    # Every target the same vector (an encoder that maps all words to <unk>): the gold ties with all
    # m - 1 others and ranks last, so MRR is 1/m rather than a flattering 1.
    m = 50
    tgt = torch.ones(m, 4)
    assert gold_ranks(torch.ones(3, 4), tgt, [[0], [7], [49]]).tolist() == [m, m, m]
    assert mrr(torch.ones(3, 4), tgt, [[0], [7], [49]], "csls") == pytest.approx(1 / m)


def test_ranking_metrics_from_ranks():
    metrics = ranking_metrics(torch.tensor([1, 2, 4, 10, 11]), k_values=(1, 5, 10))
    assert metrics == pytest.approx({"mrr": (1 + 1 / 2 + 1 / 4 + 1 / 10 + 1 / 11) / 5, 1: 0.2, 5: 0.6, 10: 0.8})
    with pytest.raises(ValueError, match="cut-offs"):
        ranking_metrics(torch.tensor([1]), k_values=(0,))


def test_gold_formats():
    expected = gold_ranks(HAND_SRC, HAND_TGT, HAND_GOLD).tolist()
    assert gold_ranks(HAND_SRC, HAND_TGT, [1, 1, 0]).tolist() == expected  # bare ints
    assert gold_ranks(HAND_SRC, HAND_TGT, [np.array([1]), (1,), torch.tensor([0])]).tolist() == expected
    assert gold_ranks(HAND_SRC, HAND_TGT, [[1, 1], [1], [0]]).tolist() == expected  # duplicated gold index
    # the natural form: a LongTensor (or array) of one target index per query, and lists of 0-d tensors
    assert gold_ranks(HAND_SRC, HAND_TGT, torch.tensor([1, 1, 0])).tolist() == expected
    assert gold_ranks(HAND_SRC, HAND_TGT, np.array([1, 1, 0])).tolist() == expected
    assert gold_ranks(HAND_SRC, HAND_TGT, list(torch.tensor([1, 1, 0]))).tolist() == expected
    assert gold_ranks(HAND_SRC, HAND_TGT, [{1}, {1}, {0}]).tolist() == expected
    assert mrr(HAND_SRC, HAND_TGT, torch.tensor([1, 1, 0])) == mrr(HAND_SRC, HAND_TGT, HAND_GOLD)


def test_dtypes_and_return_types():
    assert isinstance(mrr(HAND_SRC, HAND_TGT, HAND_GOLD), float)
    assert all(isinstance(v, float) for v in precision_at_k(HAND_SRC, HAND_TGT, HAND_GOLD).values())
    assert gold_ranks(HAND_SRC.long(), HAND_TGT.double(), HAND_GOLD).tolist() == [3, 1, 3]
    assert similarity_matrix(HAND_SRC.long(), HAND_TGT.long()).is_floating_point()


# ---------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "call",
    [
        lambda: similarity_matrix(HAND_SRC, HAND_TGT, similarity="dot"),
        lambda: gold_ranks(HAND_SRC, HAND_TGT, HAND_GOLD, similarity="CSLS"),
        lambda: mrr(HAND_SRC, HAND_TGT, HAND_GOLD, similarity="euclid"),
        lambda: precision_at_k(HAND_SRC, HAND_TGT, HAND_GOLD, similarity="cos"),
    ],
)
def test_invalid_similarity_name(call):
    with pytest.raises(ValueError, match="cosine") as err:
        call()
    assert "csls" in str(err.value)


@pytest.mark.parametrize(
    "gold,match",
    [
        ([[1], [], [0]], "empty"),
        ([[1], [1]], "one set"),
        ([[1], [1], [3]], r"\[0, 3\)"),
        ([[1], [-1], [0]], r"\[0, 3\)"),
    ],
)
def test_invalid_gold(gold, match):
    with pytest.raises(ValueError, match=match):
        gold_ranks(HAND_SRC, HAND_TGT, gold)
    with pytest.raises(ValueError, match=match):
        mrr(HAND_SRC, HAND_TGT, gold, similarity="csls")


def test_invalid_shapes_and_parameters():
    with pytest.raises(ValueError, match="dims"):
        similarity_matrix(HAND_SRC, torch.zeros(3, 4))
    with pytest.raises(ValueError, match="2-D"):
        gold_ranks(HAND_SRC[0], HAND_TGT, [[0]])
    with pytest.raises(ValueError, match="at least one row"):
        mrr(HAND_SRC, torch.zeros(0, 2), HAND_GOLD)
    with pytest.raises(ValueError, match="k must be >= 1"):
        similarity_matrix(HAND_SRC, HAND_TGT, "csls", k=0)
    with pytest.raises(ValueError, match="cut-offs"):
        precision_at_k(HAND_SRC, HAND_TGT, HAND_GOLD, k_values=(0, 1))
    with pytest.raises(ValueError, match="chunk_size"):
        gold_ranks(HAND_SRC, HAND_TGT, HAND_GOLD, chunk_size=0)


# ---------------------------------------------------------------- CSLS over the source space
def test_csls_rank_of_a_query_does_not_depend_on_the_other_queries():
    """r_S(y) over the source vocabulary (Conneau et al. 2018), not over whichever queries are scored together."""
    g = torch.Generator().manual_seed(3)
    source_space, targets = torch.randn(60, 8, generator=g), torch.randn(40, 8, generator=g)
    gold = list(range(20))
    alone = [
        int(gold_ranks(source_space[[i]], targets, [gold[i]], "csls", 5, src_space=source_space)) for i in range(20)
    ]
    together = gold_ranks(source_space[:20], targets, gold, "csls", 5, src_space=source_space).tolist()
    assert alone == together
    # r_S over the queries themselves (no source space given) makes a query's rank depend on its company
    assert [int(gold_ranks(source_space[[i]], targets, [gold[i]], "csls", 5)) for i in range(20)] != together
    # the hand formula: 2 cos - r_T(x) - r_S(y), r_S over the source space
    s, t = F.normalize(source_space, dim=1), F.normalize(targets, dim=1)
    cos = s[:3] @ t.T
    r_t = cos.topk(5, dim=1).values.mean(1)
    r_s = (t @ s.T).topk(5, dim=1).values.mean(1)
    expected = 2 * cos - r_t[:, None] - r_s[None, :]
    assert torch.allclose(
        similarity_matrix(source_space[:3], targets, "csls", 5, src_space=source_space), expected, atol=1e-6
    )
