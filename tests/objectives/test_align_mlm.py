import numpy as np
import pytest
import torch

from distalign.objectives.align_mlm import align_loss


def _np_cos(u, v):
    return float(u @ v / (np.linalg.norm(u) * np.linalg.norm(v)))


def _np_word(E, ids):
    ids = np.atleast_1d(ids)
    return E[[i for i in ids if i != -1]].mean(0)


def test_identical_orthogonal_opposite_rows():
    E = torch.tensor([[1.0, 0.0], [2.0, 0.0], [0.0, 3.0], [-1.0, 0.0]])
    assert align_loss(E, torch.tensor([0, 1]), torch.tensor([1, 0])).item() == pytest.approx(-1.0)
    assert align_loss(E, torch.tensor([0]), torch.tensor([2])).item() == pytest.approx(0.0, abs=1e-7)
    assert align_loss(E, torch.tensor([0]), torch.tensor([3])).item() == pytest.approx(1.0)
    # mean over pairs: cos = 1, 0, -1 -> loss = -0
    assert align_loss(E, torch.tensor([0, 0, 0]), torch.tensor([1, 2, 3])).item() == pytest.approx(0.0, abs=1e-7)
    # cos = 1 and 0 -> -0.5
    assert align_loss(E, torch.tensor([0, 1]), torch.tensor([1, 2])).item() == pytest.approx(-0.5)


def test_single_token_matches_numpy():
    g = torch.Generator().manual_seed(0)
    E = torch.randn(50, 8, generator=g)
    src = torch.randint(0, 50, (20,), generator=g)
    tgt = torch.randint(0, 50, (20,), generator=g)
    En = E.numpy()
    ref = -np.mean([_np_cos(En[s], En[t]) for s, t in zip(src.tolist(), tgt.tolist())])
    assert align_loss(E, src, tgt).item() == pytest.approx(ref, rel=1e-5)


def test_multi_token_words_mean_of_valid_subwords():
    g = torch.Generator().manual_seed(1)
    E = torch.randn(30, 6, generator=g, dtype=torch.float64)
    src = torch.tensor([[3, 7, -1], [5, -1, -1], [1, 2, 9]])
    tgt = torch.tensor([[4, -1], [8, 11], [0, -1]])
    En = E.numpy()
    ref = -np.mean([_np_cos(_np_word(En, s), _np_word(En, t)) for s, t in zip(src.numpy(), tgt.numpy())])
    assert align_loss(E, src, tgt).item() == pytest.approx(ref, rel=1e-10)
    # mixing 1-D and 2-D layouts; [N, 1] equals [N]
    tgt1 = torch.tensor([4, 8, 0])
    ref1 = -np.mean([_np_cos(_np_word(En, s), En[t]) for s, t in zip(src.numpy(), tgt1.numpy())])
    assert align_loss(E, src, tgt1).item() == pytest.approx(ref1, rel=1e-10)
    assert torch.allclose(align_loss(E, src, tgt1), align_loss(E, src, tgt1[:, None]))


def test_mean_not_sum_of_subwords_hand_case():
    # unequal row norms distinguish the mean of raw rows from a mean of normalised rows
    E = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    # mean([2,0],[0,1]) = [1, .5]; cos with [1, 0] = 1/sqrt(1.25)
    loss = align_loss(E, torch.tensor([[0, 1]]), torch.tensor([2]))
    assert loss.item() == pytest.approx(-1 / np.sqrt(1.25), rel=1e-6)


def test_gradients():
    g = torch.Generator().manual_seed(2)
    E = torch.randn(10, 4, generator=g, dtype=torch.float64, requires_grad=True)
    src = torch.tensor([[1, 2], [3, -1]])
    tgt = torch.tensor([4, 5])
    assert torch.autograd.gradcheck(lambda W: align_loss(W, src, tgt), (E,))
    align_loss(E, src, tgt).backward()
    touched = E.grad.abs().sum(1) > 0
    assert touched.tolist() == [i in {1, 2, 3, 4, 5} for i in range(10)]


def test_errors():
    E = torch.randn(10, 4)
    with pytest.raises(ValueError, match="same number"):
        align_loss(E, torch.tensor([1, 2, 3]), torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="row 1"):
        align_loss(E, torch.tensor([[1, 2], [-1, -1]]), torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="row 0"):
        align_loss(E, torch.tensor([1, 2]), torch.tensor([[-1], [3]]))
    with pytest.raises(ValueError, match="row 1"):
        align_loss(E, torch.tensor([1, 10]), torch.tensor([1, 2]))


def test_align_objective_equals_align_loss_on_the_full_embedding_matrix():
    from transformers import XLMRobertaConfig, XLMRobertaForMaskedLM

    from distalign.train.module import TrainingModule
    from distalign.objectives.align_mlm import AlignObjective, word_token_ids

    torch.manual_seed(0)
    lm = XLMRobertaForMaskedLM(XLMRobertaConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1,
                                                num_attention_heads=2, intermediate_size=32,
                                                max_position_embeddings=20))
    model = TrainingModule(lm, {"align": AlignObjective()}, {"align": 10.0})
    # <s> word-subwords </s> <pad>...: word 1 = [5, 6], word 2 = [7]; word 1' = [9], word 2' = [5, 11, 12]
    batch = {"input_ids1": torch.tensor([[0, 5, 6, 2, 1], [0, 9, 2, 1, 1]]),
             "word_mask1": torch.tensor([[0, 1, 1, 0, 0], [0, 1, 0, 0, 0]]),
             "input_ids2": torch.tensor([[0, 7, 2, 1, 1], [0, 5, 11, 12, 2]]),
             "word_mask2": torch.tensor([[0, 1, 0, 0, 0], [0, 1, 1, 1, 0]])}
    assert word_token_ids(batch["input_ids1"], batch["word_mask1"]).tolist() == [[-1, 5, 6, -1, -1],
                                                                                  [-1, 9, -1, -1, -1]]
    losses = model({"constraints": batch})
    E = lm.get_input_embeddings().weight.detach().numpy()
    expected = -(_np_cos(E[[5, 6]].mean(0), E[7]) + _np_cos(E[9], E[[5, 11, 12]].mean(0))) / 2
    assert losses["align"].item() == pytest.approx(expected, abs=1e-6)
    assert losses["loss"].item() == pytest.approx(10 * expected, abs=1e-5)
    losses["loss"].backward()
    grad = lm.get_input_embeddings().weight.grad
    assert set(grad.abs().sum(1).nonzero().flatten().tolist()) == {5, 6, 7, 9, 11, 12}  # only the pairs' rows
