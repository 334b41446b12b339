import numpy as np
import pytest
import torch
import torch.nn.functional as F
from transformers import BertConfig, BertForMaskedLM, XLMRobertaConfig, XLMRobertaForMaskedLM

from distalign.collectives import all_gather_rows
from distalign.objectives.mlm import IGNORE_INDEX
from distalign.objectives.sense_aware import (
    SenseAwareObjective,
    SenseOutputLayer,
    build_translation_table,
    prediction_transform,
    sense_aware_loss,
    translation_labels,
)
from distalign.objectives.sense_state import (
    SenseState,
    ema_update_,
    nearest_sense,
    principal_components,
    prune_mask,
)
from distalign.train.module import TrainingModule

V, D = 30, 16


def tiny_xlmr(seed=0):
    torch.manual_seed(seed)
    config = XLMRobertaConfig(
        vocab_size=V,
        hidden_size=D,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=20,
    )
    return XLMRobertaForMaskedLM(config).eval()


def corpus_batch(seed=0, batch=3, length=8):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, V, (batch, length), generator=g)
    labels = torch.full_like(ids, IGNORE_INDEX)
    picked = torch.rand(batch, length, generator=g) < 0.4
    picked[0, 1] = True
    labels[picked] = ids[picked]
    masked = ids.masked_fill(picked, 4)
    return {"masked_ids": masked, "attention_mask": torch.ones_like(ids), "labels": labels}


# ---------------------------------------------------------------- projection
def test_principal_components_match_numpy_covariance_eigenvectors():
    g = torch.Generator().manual_seed(0)
    states = torch.randn(60, 6, generator=g, dtype=torch.float64) * torch.tensor(
        [5.0, 3, 2, 1, 0.5, 0.1], dtype=torch.float64
    )
    mean, components = principal_components(states, 3)
    values, vectors = np.linalg.eigh(np.cov(states.numpy(), rowvar=False))
    top = vectors[:, np.argsort(values)[::-1][:3]]
    np.testing.assert_allclose(mean.numpy(), states.numpy().mean(0), atol=1e-12)
    for j in range(3):
        sign = np.sign(top[:, j] @ components[:, j].numpy())
        np.testing.assert_allclose(components[:, j].numpy(), sign * top[:, j], atol=1e-8)
    # sign convention: the largest-magnitude entry of each component is positive
    assert (components.gather(0, components.abs().argmax(0, keepdim=True)) > 0).all()
    with pytest.raises(ValueError, match="more than k states"):
        principal_components(states[:3], 3)


# ---------------------------------------------------------------- centre update
def test_ema_update_single_row_formula():
    centres = torch.tensor([[1.0, 0.0], [4.0, 4.0]])
    out = ema_update_(centres, torch.tensor([0]), torch.tensor([[0.0, 2.0]]), alpha=0.25)
    assert torch.allclose(out, torch.tensor([[0.75, 0.5], [4.0, 4.0]]))


def test_ema_update_repeated_key_is_sequential_not_mean():
    # c=0, values 1 then 3, alpha=.5: sequential -> .5 then .25 + 1.5 = 1.75 (a mean update would give 1.0)
    out = ema_update_(torch.zeros(1, 1), torch.tensor([0, 0]), torch.tensor([[1.0], [3.0]]), alpha=0.5)
    assert out.item() == pytest.approx(1.75)


def test_ema_update_matches_row_by_row_loop():
    g = torch.Generator().manual_seed(1)
    centres = torch.randn(7, 3, generator=g, dtype=torch.float64)
    keys = torch.tensor([3, 0, 3, 6, 3, 0, 2])
    values = torch.randn(7, 3, generator=g, dtype=torch.float64)
    expected = centres.clone()
    for key, value in zip(keys.tolist(), values):
        expected[key] = 0.7 * expected[key] + 0.3 * value
    assert torch.allclose(ema_update_(centres, keys, values, alpha=0.3), expected, atol=1e-12)
    with pytest.raises(ValueError, match="alpha"):
        ema_update_(centres, keys, values, alpha=0.0)


# ---------------------------------------------------------------- selection, warm-up, pruning
def test_nearest_sense_uses_cosine_skips_inactive_and_breaks_ties_low():
    centres = torch.tensor([[[1.0, 0.1], [10.0, 10.0], [0.0, 1.0]]])  # token 0, 3 senses
    active = torch.ones(1, 3, dtype=torch.bool)
    z = torch.tensor([[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]])
    tokens = torch.zeros(3, dtype=torch.long)
    # [1, 0]: cos .995 / .707 / 0 -> sense 0 (a dot product would pick the long sense 1);
    # [0, 2]: cos .0995 / .707 / 1 -> sense 2; the zero vector ties everywhere -> sense 0
    assert nearest_sense(centres, active, tokens, z).tolist() == [0, 2, 0]
    active[0, 2] = False
    assert nearest_sense(centres, active, tokens, z).tolist() == [0, 1, 0]


def fitted_state(warmup_steps=0, **kwargs):
    state = SenseState(
        vocab_size=4,
        num_senses=2,
        hidden_size=3,
        proj_dim=2,
        queue_size=8,
        refit_every=kwargs.pop("refit_every", 100),
        warmup_steps=warmup_steps,
        **kwargs,
    )
    state.proj, state.fitted = torch.eye(3)[:, :2], True
    state.centres[1] = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    state.projected_centres = state.centres @ state.proj
    return state


def test_senses_are_chosen_by_cosine_of_uncentred_projections_as_in_the_paper():
    # Algorithm 1 line 7 and §3.2 compare cos(h P, c P); the authors' code projects with
    # tf.matmul(h, pca_m), subtracting no mean. This queue has mean (1, 0) and principal axes e1, e2: P = I.
    state = SenseState(vocab_size=3, num_senses=2, hidden_size=2, proj_dim=2, queue_size=4, refit_every=100)
    state.update_queue(torch.tensor([[3.0, 0.0], [-1.0, 0.0], [1.0, 1.0], [1.0, -1.0]]))
    assert state.maybe_refit_projection() and not state.single_sense
    assert torch.allclose(state.proj, torch.eye(2))
    # centres of token 1 from the states (3, 0) (sense 0) and (0, 1) (sense 1), alpha = 1
    state.observe(torch.tensor([1, 1]), torch.tensor([0, 1]), torch.tensor([[3.0, 0.0], [0.0, 1.0]]), alpha=1.0)
    assert torch.allclose(state.centres[1], torch.tensor([[3.0, 0.0], [0.0, 1.0]]))  # averages of h
    h = torch.tensor([[1.1, 0.3]])
    z = state.project(h)
    assert torch.allclose(z, h)  # the queue mean (1, 0) is not subtracted
    # by hand: cos(h, (3, 0)) = 1.1 / 1.140 = .965, cos(h, (0, 1)) = .3 / 1.140 = .263 -> sense 0.
    # Centred by the queue mean it would be cos((.1, .3), (2, 0)) = .316 < cos((.1, .3), (-1, 1)) = .447 -> sense 1.
    cos = F.cosine_similarity(h, state.centres[1], dim=-1)
    assert cos.tolist() == pytest.approx([0.965, 0.263], abs=1e-3)
    assert state.select(torch.tensor([1]), z).tolist() == [0]
    # the sense-level translation label uses the same z: token 2's only translation is token 1 -> class 1 * 2 + 0
    table = torch.tensor([[-1], [-1], [1]])
    assert translation_labels(torch.tensor([2]), z, state.projected_centres, state.allowed(), table).tolist() == [2]


def test_warmup_forces_sense_zero_then_selects_nearest():
    state = fitted_state(warmup_steps=2)
    tokens, z = torch.tensor([1, 1]), torch.tensor([[0.1, 1.0], [1.0, 0.1]])
    assert state.select(tokens, z).tolist() == [0, 0]
    assert state.allowed()[:, 1].sum() == 0
    state.step = 2
    assert state.select(tokens, z).tolist() == [1, 0]
    assert state.allowed().all()
    unfitted = SenseState(vocab_size=4, num_senses=2, hidden_size=3, proj_dim=2, queue_size=8, warmup_steps=0)
    assert unfitted.single_sense and unfitted.select(tokens, z).tolist() == [0, 0]


def test_prune_mask_hand_example():
    counts = torch.tensor([[90, 8, 2], [0, 0, 0], [1, 0, 2], [0, 1, 0]])
    active = torch.ones(4, 3, dtype=torch.bool)
    # row 0: shares .9 .08 .02 -> sense 2 off; row 1 never selected; row 2 has 3 < min_count 4;
    # row 3: shares 0 1 0 with min_count 1 -> 0 and 2 off, the most chosen stays
    out = prune_mask(counts, active, beta=0.05, min_count=1)
    assert out.tolist() == [[True, True, False], [True, True, True], [True, False, True], [False, True, False]]
    out = prune_mask(counts, active, beta=0.05, min_count=4)
    assert out.tolist() == [[True, True, False], [True, True, True], [True, True, True], [True, True, True]]
    # an inactive sense stays inactive; the most chosen sense survives even with beta = 1
    assert prune_mask(counts, out, beta=1.0)[0].tolist() == [True, False, False]


def test_observe_counts_after_warmup_and_pruned_sense_is_never_selected():
    state = fitted_state(warmup_steps=1)
    tokens, senses, states = torch.tensor([1, 1]), torch.tensor([0, 0]), torch.tensor([[1.0, 0, 0], [1, 0, 0]])
    state.observe(tokens, senses, states, alpha=0.5)  # warm-up step: no counts
    assert state.counts.sum() == 0 and state.step == 1
    state.observe(tokens, torch.tensor([0, 1]), states, alpha=0.5)
    assert state.counts[1].tolist() == [1, 1]
    state.counts[1] = torch.tensor([20, 1])
    assert state.prune(0.1) == 1 and state.active[1].tolist() == [True, False]
    assert state.select(torch.tensor([1]), torch.tensor([[0.0, 1.0]])).tolist() == [0]


# ---------------------------------------------------------------- queue and refit
def test_queue_is_fifo_and_refit_keeps_centres_in_the_model_space():
    state = SenseState(vocab_size=3, num_senses=2, hidden_size=4, proj_dim=2, queue_size=6, refit_every=3)
    g = torch.Generator().manual_seed(2)
    first = torch.randn(5, 4, generator=g, dtype=torch.float64).float()
    second = torch.randn(4, 4, generator=g)
    state.update_queue(first)
    assert state.queue_filled == 5
    state.update_queue(second)
    kept = torch.cat([first, second])[-6:]
    assert state.queue_filled == 6
    assert torch.equal(torch.sort(state.queue, 0).values, torch.sort(kept, 0).values)
    assert state.maybe_refit_projection() and state.fitted
    # independently: the top-2 eigenvectors of the centred queue's scatter matrix, each up to its sign
    centred = kept.double().numpy() - kept.double().numpy().mean(0)
    values, vectors = np.linalg.eigh(centred.T @ centred)
    top = vectors[:, np.argsort(values)[::-1][:2]]
    for j in range(2):
        sign = np.sign(top[:, j] @ state.proj[:, j].double().numpy())
        np.testing.assert_allclose(state.proj[:, j].numpy(), sign * top[:, j], atol=1e-5)
    h = torch.tensor([[1.0, -2.0, 0.5, 3.0]])
    state.update_centres(torch.tensor([2]), torch.tensor([1]), h, alpha=1.0)
    assert torch.equal(state.centres[2, 1], h[0])  # c = h (alpha = 1)
    assert torch.allclose(state.projected_centres[2, 1], h[0] @ state.proj)
    old_centres = state.centres.clone()
    state.step = 2
    assert not state.maybe_refit_projection()  # M = 3 steps have not passed
    state.update_queue(torch.randn(3, 4, generator=g) * 5 + torch.tensor([4.0, -3.0, 2.0, 5.0]))  # the mean moves
    state.step = 3
    assert state.maybe_refit_projection()
    assert torch.equal(state.centres, old_centres)  # a refit changes how centres are seen, not them
    assert torch.allclose(state.projected_centres, old_centres @ state.proj)


def test_a_refit_chooses_senses_as_with_centres_kept_in_the_model_space():
    # Algorithm 1 keeps c in the d-space and compares cos(c P, h P). Token 1's senses hold (1, 1) and (1, -1);
    # P_old = e1 sees both as 1, P_new = e2 as 1 and -1. A query h = (0, -2) projects to -2: sense 1.
    # Carried through the old subspace instead (c <- P_newᵀ P_old c), both centres would be 0 and tie to sense 0.
    state = SenseState(vocab_size=2, num_senses=2, hidden_size=2, proj_dim=1, queue_size=4, refit_every=1)
    state.update_queue(torch.tensor([[3.0, 0.0], [-3.0, 0.0], [0.0, 1.0], [0.0, -1.0]]))  # variance along e1
    assert state.maybe_refit_projection() and torch.allclose(state.proj, torch.tensor([[1.0], [0.0]]), atol=1e-4)
    state.update_centres(torch.tensor([1, 1]), torch.tensor([0, 1]), torch.tensor([[1.0, 1.0], [1.0, -1.0]]), alpha=1.0)
    state.update_queue(torch.tensor([[0.0, 3.0], [0.0, -3.0], [1.0, 0.0], [-1.0, 0.0]]))  # now along e2
    state.step = 1
    assert state.maybe_refit_projection() and torch.allclose(state.proj, torch.tensor([[0.0], [1.0]]), atol=1e-4)
    query = torch.tensor([[0.0, -2.0]])
    by_hand = F.cosine_similarity(state.project(query), state.centres[1] @ state.proj, dim=-1).argmax().item()
    assert by_hand == 1 and state.select(torch.tensor([1]), state.project(query)).tolist() == [1]


def test_state_dict_round_trip():
    state = fitted_state(warmup_steps=0, seed=3)
    state.observe(torch.tensor([1, 2, 1]), torch.tensor([1, 0, 1]), torch.randn(3, 3), alpha=0.2)
    state.prune(0.4, min_count=1)
    restored = SenseState(vocab_size=4, num_senses=2, hidden_size=3, proj_dim=2, queue_size=8, refit_every=100, seed=99)
    restored.load_state_dict(state.state_dict())
    for name, value in state.state_dict().items():
        assert torch.equal(restored.state_dict()[name], value), name
    assert restored.fitted and restored.step == 1
    with pytest.raises(ValueError, match="centres"):
        SenseState(vocab_size=5, num_senses=2, hidden_size=3, proj_dim=2, queue_size=8).load_state_dict(
            state.state_dict()
        )
    assert torch.equal(restored.projected_centres, state.projected_centres)  # derived again on load
    # a state saved by an earlier version (centres in a projected space, an "updated" mask) does not fit
    with pytest.raises(ValueError, match=r"unexpected entries \['updated'\]"):
        restored.load_state_dict({**state.state_dict(), "updated": torch.zeros(4, 2, dtype=torch.bool)})


# ---------------------------------------------------------------- translation labels and loss
def test_build_translation_table():
    table = build_translation_table([1, 1, 2, 1, 3], [2, 4, 1, 3, 3], vocab_size=5, max_translations=2)
    # 1->2, 1->4 (1->3 over the limit), 2->1, 4->1, 3->1; 3->3 is a self-pair; 2->1 twice kept once
    assert table.tolist() == [[-1, -1], [2, 4], [1, -1], [1, -1], [1, -1]]
    assert build_translation_table([1], [2], 5, symmetric=False)[2].tolist() == [-1] * 8
    with pytest.raises(ValueError, match=r"tgt_ids\[0\] = 7"):
        build_translation_table([1], [7], vocab_size=5)


def test_translation_label_picks_nearest_sense_over_all_translations():
    centres = torch.zeros(5, 2, 2)
    centres[2] = torch.tensor([[1.0, 0.0], [0.6, 0.8]])
    centres[3] = torch.tensor([[0.0, 1.0], [-1.0, 0.0]])
    allowed = torch.ones(5, 2, dtype=torch.bool)
    table = torch.tensor([[-1, -1], [2, 3], [-1, -1], [-1, -1], [3, -1]])
    targets = torch.tensor([1, 1, 0, 4])
    z = torch.tensor([[0.5, 1.0], [1.0, 0.1], [1.0, 1.0], [-1.0, 0.2]])
    # z0: cos with (2,1)=.98, (3,0)=.89 -> 2*2+1; z1: (2,0) -> 4; target 0 has none; z3 -> (3,1) = 7
    assert translation_labels(targets, z, centres, allowed, table).tolist() == [5, 4, IGNORE_INDEX, 7]
    allowed[2, 1] = False
    assert translation_labels(targets, z, centres, allowed, table)[0].item() == 6  # (3, 0)
    # before the projection is fitted z is zero: every cosine is 0 -> first translation, first sense
    assert translation_labels(targets, torch.zeros(4, 2), centres, allowed, table).tolist() == [4, 4, -100, 6]


def test_loss_matches_per_position_loop():
    g = torch.Generator().manual_seed(4)
    logits = torch.randn(5, 12, generator=g, dtype=torch.float64)
    logits[:, 11] = float("-inf")  # an inactive class
    labels = torch.tensor([3, IGNORE_INDEX, 0, 7, 10])
    second = torch.tensor([5, 2, IGNORE_INDEX, 1, IGNORE_INDEX])
    terms = []
    for i in range(5):
        if labels[i] == IGNORE_INDEX:
            continue
        ce = F.cross_entropy(logits[i : i + 1], labels[i : i + 1])
        if second[i] != IGNORE_INDEX:
            ce = 0.7 * ce + 0.3 * F.cross_entropy(logits[i : i + 1], second[i : i + 1])
        terms.append(ce)
    expected = torch.stack(terms).mean()
    assert sense_aware_loss(logits, labels, second, 0.3).item() == pytest.approx(expected.item(), rel=1e-12)
    # lambda = .5 is the paper's plain mean of the two cross-entropies
    half = (F.cross_entropy(logits[:1], labels[:1]) + F.cross_entropy(logits[:1], second[:1])) / 2
    assert sense_aware_loss(logits[:1], labels[:1], second[:1]).item() == pytest.approx(half.item(), rel=1e-12)
    # no position with a label (a batch that drew no masked word): 0, attached to the graph, no host sync
    empty = logits[1:2].clone().requires_grad_()
    loss = sense_aware_loss(empty, labels[1:2], second[1:2])
    loss.backward()
    assert loss.item() == 0 and torch.equal(empty.grad, torch.zeros_like(empty))


# ---------------------------------------------------------------- model pieces
@pytest.mark.parametrize("architecture", ["xlmr", "bert"])
def test_sense_zero_reproduces_original_decoder_logits(architecture):
    if architecture == "xlmr":
        masked_lm = tiny_xlmr()
    else:
        torch.manual_seed(0)
        masked_lm = BertForMaskedLM(
            BertConfig(
                vocab_size=V,
                hidden_size=D,
                num_hidden_layers=1,
                num_attention_heads=2,
                intermediate_size=32,
                max_position_embeddings=20,
            )
        ).eval()
    ids = corpus_batch()["masked_ids"]
    with torch.no_grad():
        reference = masked_lm(input_ids=ids).logits
        hidden = masked_lm.base_model(input_ids=ids).last_hidden_state
        states = prediction_transform(masked_lm)(hidden)
        layer = SenseOutputLayer.from_masked_lm(masked_lm, num_senses=3)
        logits = layer(states, torch.ones(V, 3, dtype=torch.bool)).view(*ids.shape, V, 3)
    assert torch.allclose(logits[..., 0], reference, atol=1e-5)
    # untied: separate parameters; an SGD step on the sense vectors leaves the decoder (and the input
    # embeddings, tied to it in both models) as they were, and a change to the decoder leaves the senses
    decoder, embeddings = masked_lm.get_output_embeddings(), masked_lm.get_input_embeddings()
    for num_senses in (1, 3):
        layer = SenseOutputLayer.from_masked_lm(masked_lm, num_senses)
        assert all(p is not q for p in layer.parameters() for q in masked_lm.parameters())
        decoder_before, embeddings_before = decoder.weight.detach().clone(), embeddings.weight.detach().clone()
        optimizer = torch.optim.SGD(layer.parameters(), lr=1.0)
        F.cross_entropy(
            layer(states.reshape(-1, D), torch.ones(V, num_senses, dtype=torch.bool)),
            torch.zeros(states.shape[0] * states.shape[1], dtype=torch.long),
        ).backward()
        optimizer.step()
        assert not torch.equal(layer.weight.detach()[::num_senses], decoder_before)  # the senses moved
        assert torch.equal(decoder.weight, decoder_before) and torch.equal(embeddings.weight, embeddings_before)
        senses_before = layer.weight.detach().clone()
        with torch.no_grad():
            decoder.weight.add_(1.0)
        assert torch.equal(layer.weight, senses_before)
    with pytest.raises(ValueError, match="no known MLM head"):
        prediction_transform(torch.nn.Linear(2, 2))


def test_masked_senses_get_minus_infinity_and_copy_sense_zero():
    layer = SenseOutputLayer(torch.randn(4, 3), torch.randn(4), num_senses=2)
    with torch.no_grad():
        layer.weight[1] += 1.0  # token 0, sense 1 drifts
    allowed = torch.tensor([[True, False]] * 4)
    logits = layer(torch.randn(2, 3), allowed)
    assert torch.isinf(logits[:, 1::2]).all() and torch.isfinite(logits[:, 0::2]).all()
    layer.weight.data[0] = 7.0
    layer.copy_sense_zero_()
    assert torch.equal(layer.weight[1], torch.full((3,), 7.0)) and torch.equal(layer.bias[0::2], layer.bias[1::2])


def make_objective(**kwargs):
    masked_lm = tiny_xlmr()
    table = build_translation_table([5, 6, 7], [20, 21, 22], vocab_size=V, max_translations=2)
    defaults = dict(num_senses=2, proj_dim=3, queue_size=64, refit_every=2, alpha=0.5, warmup_steps=2)
    objective = SenseAwareObjective(masked_lm=masked_lm, translation_table=table, **{**defaults, **kwargs})
    return TrainingModule(masked_lm, {"sense_aware": objective}, {"sense_aware": 1.0}), objective


def test_objective_trains_updates_state_and_keeps_export_architecture():
    model, objective = make_objective()  # warm-up: 2 steps
    original_keys = set(tiny_xlmr().state_dict())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    initial = objective.sense_output.weight.detach().clone().view(V, 2, D)
    model.train()
    for step in range(4):
        losses = model({"corpus": corpus_batch(seed=step)})
        assert torch.isfinite(losses["loss"])
        losses["loss"].backward()
        grad = objective.sense_output.weight.grad.view(V, 2, D)
        assert grad[:, 0].abs().sum() > 0
        assert model.masked_lm.roberta.encoder.layer[0].attention.self.query.weight.grad.abs().sum() > 0
        # single-sense mode (steps 0, 1): the other sense's vectors get no gradient
        assert (grad[:, 1].abs().sum() == 0) == (step < 2)
        optimizer.step()
        optimizer.zero_grad()
        objective.update_state(gather=lambda rows: rows)
        senses = objective.sense_output.weight.detach().view(V, 2, D)
        if step == 0:
            assert torch.equal(senses[:, 1], initial[:, 1]) and not torch.equal(senses[:, 0], initial[:, 0])
        if step == 1:  # warm-up just ended: sense 0 copied over
            assert torch.equal(senses[:, 1], senses[:, 0]) and not torch.equal(senses[:, 1], initial[:, 1])
    state = objective.sense_state
    assert state.step == 4 and state.fitted and not state.single_sense
    assert not torch.equal(
        state.centres[:, 0],
        SenseState(vocab_size=V, num_senses=2, hidden_size=D, proj_dim=3, queue_size=64).centres[:, 0],
    )
    assert state.counts.sum() > 0
    assert set(model.masked_lm.state_dict()) == original_keys


def test_objective_prunes_rare_senses_at_refits_after_warmup():
    g = torch.Generator().manual_seed(6)

    def run(prune_beta):
        _, objective = make_objective(warmup_steps=0, refit_every=2, prune_beta=prune_beta, prune_min_count=2)
        steps = [
            ([8, 9, 10, 11, 12], [0, 0, 0, 0, 0]),  # no projection yet: fitted at the end, no counts
            ([5, 5, 5, 6], [0, 0, 0, 0]),  # counted; no refit (1 of M = 2 steps since the fit)
            ([5, 6, 6, 6, 7, 8, 8], [1, 1, 1, 0, 1, 0, 0]),
        ]  # counted; refit -> prune
        active_after = []
        for tokens, senses in steps:  # this step's (class = token·S + sense, state) rows, as forward leaves them
            classes = torch.tensor(tokens) * objective.sense_state.num_senses + torch.tensor(senses)
            objective._pending.append((classes, torch.randn(len(tokens), D, generator=g)))
            objective.update_state(gather=lambda rows: rows)
            active_after.append(objective.sense_state.active.clone())
        return objective.sense_state, active_after

    state, active_after = run(prune_beta=0.3)
    assert state.counts[5:9].tolist() == [[3, 1], [2, 2], [0, 1], [2, 0]] and state.counts.sum() == 11
    assert active_after[0].all() and active_after[1].all()  # token 5's share of sense 1 is 0 but no refit yet
    # by hand, after the refit: token 5 shares .75 / .25 -> sense 1 (< .3) off; token 6 .5 / .5 keeps both;
    # token 7 (0 / 1) was selected once, under prune_min_count = 2, and keeps both; token 8 (1 / 0) -> sense 1
    # off; tokens never selected keep both
    expected = torch.ones(V, 2, dtype=torch.bool)
    expected[5, 1] = expected[8, 1] = False
    assert torch.equal(state.active, expected)
    assert state.allowed()[5].tolist() == [True, False]
    state, _ = run(prune_beta=0.0)  # beta = 0 never prunes, not even token 8's 0 share
    assert state.active.all()


def test_objective_state_dict_round_trip_restores_sense_state_and_loss():
    model, objective = make_objective(warmup_steps=0)
    model.train()
    for step in range(3):
        model({"corpus": corpus_batch(seed=step)})
        objective.update_state(gather=lambda rows: rows)
    checkpoint = model.state_dict()
    assert "objectives.sense_aware._extra_state" in checkpoint
    restored_model, restored = make_objective(warmup_steps=0, seed=5)
    restored_model.load_state_dict(checkpoint)
    for name, value in objective.sense_state.state_dict().items():
        assert torch.equal(restored.sense_state.state_dict()[name], value), name
    model.eval()
    restored_model.eval()
    batch = {"corpus": corpus_batch(seed=9)}
    assert torch.allclose(model(batch)["loss"], restored_model(batch)["loss"])


def _gather_worker(rank, init_file, results):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    rows = torch.full((rank + 1, 2), float(rank))
    results[rank] = all_gather_rows(rows).tolist()
    dist.destroy_process_group()


def test_all_gather_rows_concatenates_uneven_ranks_in_order(tmp_path):
    import torch.multiprocessing as mp

    assert torch.equal(all_gather_rows(torch.ones(2, 3)), torch.ones(2, 3))  # no process group: unchanged
    results = mp.Manager().dict()
    # fork: the children need not import torch again (spawn costs seconds on 2 cores)
    mp.start_processes(_gather_worker, args=(str(tmp_path / "init"), results), nprocs=2, start_method="fork")
    expected = [[0.0, 0.0], [1.0, 1.0], [1.0, 1.0]]
    assert results[0] == expected and results[1] == expected
