import itertools

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


def metaspace_tokenizer():
    """A SentencePiece-style tokenizer whose "xy" is ["▁", "x", "y"]: the word-start mark stands alone."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = [
        ("<s>", 0.0),
        ("<pad>", 0.0),
        ("</s>", 0.0),
        ("<unk>", 0.0),
        ("<mask>", 0.0),
        ("▁", -1.0),
        ("▁haus", -1.0),
        ("▁baum", -1.0),
        ("x", -2.0),
        ("y", -2.0),
        ("z", -2.0),
        ("▁arbre", -1.0),
    ]
    sp = Tokenizer(models.Unigram(vocab, unk_id=3))
    sp.pre_tokenizer = pre_tokenizers.Metaspace()
    return PreTrainedTokenizerFast(
        tokenizer_object=sp,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        mask_token="<mask>",
    )


def word_pairs(rows):
    import pyarrow as pa

    return pa.table({k: [r[i] for r in rows] for i, k in enumerate(("word1", "lang1", "word2", "lang2"))})


def test_dictionary_token_ids_leave_out_the_lone_word_start_mark_and_same_language_pairs():
    from distalign.objectives.align_mlm import dictionary_token_ids

    tokenizer = metaspace_tokenizer()
    assert tokenizer.convert_ids_to_tokens(
        tokenizer([["xy"]], is_split_into_words=True, add_special_tokens=False)["input_ids"][0]
    ) == ["▁", "x", "y"]
    src, tgt, left_out = dictionary_token_ids(
        word_pairs([("haus", "de", "xy", "fr"), ("baum", "de", "arbre", "fr"), ("haus", "de", "baum", "de")]), tokenizer
    )
    assert src.tolist() == [[6], [7]] and tgt.tolist() == [[8, 9], [11, -1]] and left_out == 1


def tiny_lm(vocab_size=12):
    from transformers import XLMRobertaConfig, XLMRobertaForMaskedLM

    torch.manual_seed(0)
    return XLMRobertaForMaskedLM(
        XLMRobertaConfig(
            vocab_size=vocab_size,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=20,
        )
    )


def test_the_align_objective_takes_every_dictionary_pair_each_step():
    """The paper's L_align is a mean over the whole dictionary B, as in the authors' code: no batch of pairs."""
    from distalign.objectives.align_mlm import AlignConfig, AlignObjective
    from distalign.objectives.base import ObjectiveContext
    from distalign.train.module import TrainingModule

    lm = tiny_lm()
    pairs = word_pairs([("haus", "de", "xy", "fr"), ("baum", "de", "arbre", "fr"), ("baum", "de", "z", "fr")])
    objective = AlignObjective.build(
        AlignConfig(weight=10.0), ObjectiveContext(lm, metaspace_tokenizer(), ["de", "fr"], pairs)
    )
    model = TrainingModule(lm, {"align": objective}, {"align": 10.0})
    losses = model({"corpus": {}})
    E = lm.get_input_embeddings().weight.detach().numpy()
    expected = -(_np_cos(E[6], E[[8, 9]].mean(0)) + _np_cos(E[7], E[11]) + _np_cos(E[7], E[10])) / 3
    assert losses["align"].item() == pytest.approx(expected, abs=1e-6)
    assert losses["loss"].item() == pytest.approx(10 * expected, abs=1e-5)
    losses["loss"].backward()
    grad = lm.get_input_embeddings().weight.grad
    assert set(grad.abs().sum(1).nonzero().flatten().tolist()) == {6, 7, 8, 9, 10, 11}  # not the lone "▁" (5)


def test_pairs_per_step_draws_new_pairs_each_step_the_same_on_every_rank_and_on_resume():
    from distalign.objectives.align_mlm import AlignObjective

    lm = tiny_lm(vocab_size=40)
    src, tgt = torch.arange(2, 12)[:, None], torch.arange(20, 30)[:, None]  # not row 1, the zero padding row
    E = lm.get_input_embeddings().weight.detach().numpy()
    per_pair = np.array([-_np_cos(E[2 + i], E[20 + i]) for i in range(10)])

    class Model:
        masked_lm = lm

    def losses(objective, steps):
        out = []
        for _ in range(steps):
            out.append(objective(Model, {}).item())
            objective.after_step()
        return out

    drawn = losses(AlignObjective(src, tgt, pairs_per_step=3, seed=1), 4)
    # each step's loss is the mean of 3 distinct pairs' losses (some 3-subset), and the subsets change
    subsets = [
        [c for c in itertools.combinations(range(10), 3) if abs(per_pair[list(c)].mean() - d) < 1e-6] for d in drawn
    ]
    assert all(subsets) and len({s[0] for s in subsets}) > 1
    assert losses(AlignObjective(src, tgt, pairs_per_step=3, seed=1), 4) == drawn  # another rank: same draws
    resumed = AlignObjective(src, tgt, pairs_per_step=3, seed=1)
    resumed.load_state_dict({"steps": torch.tensor(2)})
    assert losses(resumed, 2) == drawn[2:]
    assert AlignObjective(src, tgt).forward(Model, {}).item() == pytest.approx(per_pair.mean(), abs=1e-6)


def test_a_run_with_no_dictionary_pair_left_is_refused_on_the_driver(tmp_path, monkeypatch):
    from conftest import QUICKSTART, SMALL

    from distalign.config import load_config
    from distalign.preparation.inputs import prepare_data

    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path))
    config = load_config(
        QUICKSTART,
        SMALL
        + [
            "run.name=no-pairs",
            "objectives.lexical.weight=0",
            "objectives.align.weight=10",
            "data.dictionary_fraction=1e-6",
        ],
    )
    with pytest.raises(ValueError, match=r"no dictionary pair left .*\['align'\]"):
        prepare_data(config)
