"""whole_word_mask: word-level selection (and token-level through token_units), 80/10/10 replacement, labels, specials
never masked."""

import numpy as np
import torch

from distalign.data.row_random import RowRandom
from distalign.objectives.mlm import IGNORE_INDEX, MLMMasking, masked_lm_loss, token_units, whole_word_mask

MASK_ID = 4
VOCAB = 5000
FIRST_REGULAR_ID = 10  # regular token ids are >= 10, so they never equal MASK_ID


def random_batch(batch=64, seq_len=48, seed=0):
    """[CLS] w0 (1-3 subwords) w1 ... [SEP] [PAD]...; word_ids -1 on specials and padding."""
    rng = np.random.default_rng(seed)
    input_ids = np.zeros((batch, seq_len), dtype=np.int64)  # 0 = pad
    word_ids = np.full((batch, seq_len), -1, dtype=np.int64)
    input_ids[:, 0] = 1  # cls
    for row in range(batch):
        length = int(rng.integers(8, seq_len - 1))
        sizes = rng.integers(1, 4, size=seq_len)
        ends = np.cumsum(sizes) + 1
        n_words = int((ends <= length).sum())
        end = int(ends[n_words - 1]) if n_words else 1
        word_ids[row, 1:end] = np.repeat(np.arange(n_words), sizes[:n_words])
        input_ids[row, 1:end] = rng.integers(FIRST_REGULAR_ID, VOCAB, size=end - 1)
        input_ids[row, end] = 2  # sep
    return torch.from_numpy(input_ids), torch.from_numpy(word_ids)


def word_spans(word_ids):
    """{(row, word): [positions]} from word_ids."""
    spans = {}
    for row, pos in (word_ids >= 0).nonzero().tolist():
        spans.setdefault((row, int(word_ids[row, pos])), []).append(pos)
    return spans


def run(input_ids, word_ids, mask_prob=0.15, seed=0, rows=None):
    random = RowRandom(seed, 0, range(len(input_ids)) if rows is None else rows)
    return whole_word_mask(input_ids, word_ids, MASK_ID, VOCAB, mask_prob, random)


def classify(input_ids, word_ids, masked, labels):
    """For each selected word: 'mask', 'random' or 'keep'. Asserts whole-word consistency on the way.

    Vectorised per word: counts of its tokens that are selected / the mask token / unchanged.
    """
    is_word = word_ids >= 0
    width = int(word_ids.max()) + 1
    key = (torch.arange(len(word_ids)).unsqueeze(1) * width + word_ids)[is_word]
    size = len(word_ids) * width

    def per_word(flags):
        return torch.bincount(key, weights=flags[is_word].double(), minlength=size)

    tokens = per_word(torch.ones_like(is_word))
    selected = per_word(labels != IGNORE_INDEX)
    as_mask = per_word(masked == MASK_ID)
    unchanged = per_word(masked == input_ids)
    present = tokens > 0
    partial = present & (selected > 0) & (selected < tokens)
    assert not partial.any(), f"partial words masked: {partial.nonzero().flatten().tolist()[:5]}"
    # unselected words are untouched
    assert torch.equal(unchanged[present & (selected == 0)], tokens[present & (selected == 0)])
    kinds = {}
    for k in (present & (selected > 0)).nonzero().flatten().tolist():
        if as_mask[k] == tokens[k]:
            kind = "mask"
        elif unchanged[k] == tokens[k]:
            kind = "keep"
        else:
            kind = "random"
        kinds[(k // width, k % width)] = kind
    return kinds


def test_small_hand_example_shapes_and_labels():
    input_ids = torch.tensor([[1, 11, 12, 13, 14, 2, 0], [1, 21, 22, 2, 0, 0, 0]])
    word_ids = torch.tensor([[-1, 0, 0, 1, 2, -1, -1], [-1, 0, 1, -1, -1, -1, -1]])
    masked, labels = run(input_ids, word_ids, mask_prob=0.999)
    assert masked.shape == labels.shape == input_ids.shape
    special = word_ids < 0
    # every word selected: labels are the original ids on word tokens, -100 on specials/padding
    assert torch.equal(labels[~special], input_ids[~special])
    assert (labels[special] == IGNORE_INDEX).all()
    assert torch.equal(masked[special], input_ids[special])
    assert torch.equal(input_ids, torch.tensor([[1, 11, 12, 13, 14, 2, 0], [1, 21, 22, 2, 0, 0, 0]]))  # not in place


def test_whole_words_labels_and_specials():
    input_ids, word_ids = random_batch(batch=128)
    masked, labels = run(input_ids, word_ids)
    special = word_ids < 0
    # specials and padding: never selected, never changed
    assert (labels[special] == IGNORE_INDEX).all()
    assert torch.equal(masked[special], input_ids[special])
    selected = labels != IGNORE_INDEX
    # labels equal the original ids exactly where selected
    assert torch.equal(labels[selected], input_ids[selected])
    # unselected tokens are unchanged
    assert torch.equal(masked[~selected], input_ids[~selected])
    kinds = classify(input_ids, word_ids, masked, labels)  # asserts no partial words
    assert kinds


def test_selection_rate_and_80_10_10_split():
    input_ids, word_ids = random_batch(batch=1500, seq_len=48, seed=1)
    masked, labels = run(input_ids, word_ids, mask_prob=0.15, seed=2)
    kinds = classify(input_ids, word_ids, masked, labels)
    n_words = int((word_ids.max(dim=1).values + 1).sum())  # words are numbered 0..k-1 per row
    assert n_words > 15000
    rate = len(kinds) / n_words
    assert abs(rate - 0.15) < 0.01, rate  # sd ≈ 0.003
    counts = {k: sum(v == k for v in kinds.values()) for k in ("mask", "random", "keep")}
    total = len(kinds)
    assert abs(counts["mask"] / total - 0.8) < 0.03, counts  # sd ≈ 0.008
    assert abs(counts["random"] / total - 0.1) < 0.025, counts  # sd ≈ 0.006
    assert abs(counts["keep"] / total - 0.1) < 0.025, counts
    # a different mask_prob changes the rate accordingly
    _, labels_half = run(input_ids, word_ids, mask_prob=0.5, seed=3)
    kinds_half = classify(input_ids, word_ids, input_ids, labels_half)
    assert abs(len(kinds_half) / n_words - 0.5) < 0.02


def test_random_replacements_are_spread_over_the_vocabulary():
    input_ids, word_ids = random_batch(batch=600, seed=4)
    masked, labels = run(input_ids, word_ids, seed=5)
    kinds = classify(input_ids, word_ids, masked, labels)
    spans = word_spans(word_ids)
    replaced = torch.cat([masked[row, spans[(row, w)]] for (row, w), k in kinds.items() if k == "random"])
    assert replaced.min() >= 0 and replaced.max() < VOCAB
    assert len(set(replaced.tolist())) > 0.8 * len(replaced)


def test_a_rows_mask_does_not_depend_on_its_batch():
    """Data-side masking is seeded per row: the same row masks alike in any batch, at any padding width."""
    input_ids, word_ids = random_batch(batch=8, seed=6)
    masked, labels = run(input_ids, word_ids)
    alone_ids, alone_labels = run(input_ids[2:5], word_ids[2:5], rows=[2, 3, 4])
    assert torch.equal(alone_ids, masked[2:5]) and torch.equal(alone_labels, labels[2:5])
    other_epoch = whole_word_mask(input_ids, word_ids, MASK_ID, VOCAB, 0.15, RowRandom(0, 1, range(8)))
    assert not torch.equal(other_epoch[1], labels)  # a new epoch draws new masks


def test_loss_of_a_batch_without_masked_words_is_zero_and_differentiable():
    logits = torch.randn(2, 4, VOCAB, requires_grad=True)
    loss = masked_lm_loss(logits, torch.full((2, 4), IGNORE_INDEX))
    loss.backward()
    assert loss.item() == 0.0 and logits.grad is not None
    labels = torch.full((2, 4), IGNORE_INDEX)
    labels[1, 2] = 7
    expected = torch.nn.functional.cross_entropy(logits[1, 2:3], torch.tensor([7]))
    assert torch.allclose(masked_lm_loss(logits, labels), expected)


def test_no_words_at_all_selects_nothing():
    input_ids = torch.tensor([[1, 2, 0, 0]])
    word_ids = torch.full((1, 4), -1)
    masked, labels = run(input_ids, word_ids)
    assert (labels == IGNORE_INDEX).all() and torch.equal(masked, input_ids)


def test_same_seed_same_result():
    input_ids, word_ids = random_batch(batch=32, seed=7)
    a = run(input_ids, word_ids, seed=11)
    b = run(input_ids, word_ids, seed=11)
    c = run(input_ids, word_ids, seed=12)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[1], c[1])


def test_token_granularity_masks_single_subwords_like_the_hf_collator():
    # DataCollatorForLanguageModeling: each non-special token selected on its own, 80/10/10 per token
    input_ids, word_ids = random_batch(batch=256, seed=5)
    masked, labels = whole_word_mask(
        input_ids, token_units(word_ids), MASK_ID, VOCAB, 0.15, RowRandom(0, 0, range(len(input_ids)))
    )
    selected = labels != IGNORE_INDEX
    assert not selected[word_ids < 0].any()
    share = selected.sum().item() / (word_ids >= 0).sum().item()
    assert abs(share - 0.15) < 0.01  # > 10,000 tokens: binomial sd < 0.004
    partial = 0  # words with some but not all of their tokens labelled: none under whole-word masking
    for (row, _), positions in word_spans(word_ids).items():
        flags = {bool(selected[row, p]) for p in positions}
        partial += len(flags) == 2
    assert partial > 100
    as_mask = (masked == MASK_ID) & selected
    assert abs(as_mask.sum().item() / selected.sum().item() - 0.8) < 0.03
    assert (masked[~selected] == input_ids[~selected]).all()


def test_preparer_granularity_reaches_the_masking():
    input_ids, word_ids = random_batch(batch=128, seed=6)
    batch = {"input_ids": input_ids.numpy(), "word_ids": word_ids.numpy()}
    random = RowRandom(0, 0, range(len(input_ids)))
    by_word = MLMMasking(MASK_ID, VOCAB, 0.15, "word")(batch, random)["labels"] != IGNORE_INDEX
    by_token = MLMMasking(MASK_ID, VOCAB, 0.15, "token")(batch, random)["labels"] != IGNORE_INDEX
    spans = word_spans(word_ids)
    split = lambda selected: sum(len({bool(selected[r, p]) for p in ps}) == 2 for (r, _), ps in spans.items())  # noqa: E731
    assert split(by_word) == 0 and split(by_token) > 0
