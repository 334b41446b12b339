"""Non-parameter training state of the sense-aware MLM: sense centres, PCA projection, state queue.

Paper: Liu, Nguyen, Joty, Bing & Si (2022), "Towards Multi-Sense Cross-Lingual Alignment of
Contextual Embeddings" (COLING; arXiv 2103.06459).

Every vocabulary entry v has S senses. A masked position whose gold token is v and whose
(prediction-head) state is h gets the sense

    s* = argmax_{s active} cos(z, Pᵀ c[v, s]),    z = Pᵀ h

where P [d, d′] holds the top-d′ principal components (d′ = 14 for BERT) of a FIFO queue of the
last Q states; P is refitted every M optimizer steps. As in the paper (Algorithm 1 line 7,
cos(c P, h P); §3.2, cossim(h P, c P)) and the authors' code (``tf.matmul(input_tensor, pca_m)``),
the state is projected without subtracting a mean: the queue mean is used only to fit the
components (PCA of the centred queue), never when projecting. The chosen centre moves towards the
state, c[v, s*] ← (1 − α) c[v, s*] + α h (α: sense learning rate).

Decisions made here (the paper leaves them open):
- Centres live in the model's d-space, as the paper's Algorithm 1 keeps them (c ← (1 − α) c + α h,
  compared as c P): a refit of P changes only how they are seen, never what they hold. A projected
  copy, c P [V, S, d′], is kept beside them for the comparisons and refreshed for the rows a step moves
  and wholly at each refit. Memory: V·S·d floats per rank (mBERT, S = 3: 1.1 GB in fp32).
- Initialisation: small random vectors (N(0, init_scale²), seeded), so the senses of a token
  start with distinct random directions; cosine ignores scale and the first updates, dominated by
  α h, quickly replace them with data.
- Single-sense mode: while ``step < warmup_steps`` or before the first projection fit every
  position gets sense 0 (and only sense 0 may be predicted). Centres of sense 0 are still updated,
  so the senses split from a meaningful token mean when warm-up ends.
- A batch with the same (token, sense) several times is applied as if its rows were processed
  one after another in row order (``ema_update``), which is deterministic.
- Selection counts accumulate only outside single-sense mode; ``prune(β)`` deactivates the senses
  of a token chosen in less than a share β of its selections (the most chosen sense always stays).

Distributed training: the state is kept identical on every rank by applying the same update on
every rank from the (token, sense, state) rows gathered from all ranks (``distalign.collectives.all_gather_rows``), in
rank order. Identical queues give identical projections, so nothing else needs broadcasting.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def principal_components(states: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (mean [d], components [d, k]): the top-k eigenvectors of the covariance of ``states``.

    Each component's sign is fixed so that its largest-magnitude entry is positive, making the
    result independent of the SVD routine's sign choice.
    """
    if states.dim() != 2:
        raise ValueError(f"states must be [n, d], got shape {tuple(states.shape)}")
    n, d = states.shape
    if not 1 <= k <= d or n <= k:
        raise ValueError(f"k={k} components need 1 <= k <= d={d} and more than k states (got n={n})")
    mean = states.mean(0)
    _, _, vh = torch.linalg.svd(states - mean, full_matrices=False)
    components = vh[:k].T
    peak = components.gather(0, components.abs().argmax(0, keepdim=True))
    return mean, components * torch.sign(peak)


def ema_update_(centres: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, alpha: float) -> torch.Tensor:
    """``centres`` [K, d], updated in place (and returned): c[keys[i]] ← (1 − α) c[keys[i]] + α values[i] for i in
    row order. In place: the centres are V·S·d floats (2.3 GB for XLM-R, S = 3), a copy a step would double them.

    Vectorised: a key seen n times ends at (1 − α)ⁿ c + Σ_r α (1 − α)^(n−1−r) values_r, r being the
    row's rank among that key's rows.
    """
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"alpha (sense learning rate) must be in (0, 1], got {alpha}")
    if keys.dim() != 1 or values.shape != (keys.shape[0], centres.shape[1]):
        raise ValueError(
            f"keys must be [N] and values [N, {centres.shape[1]}], got {tuple(keys.shape)} and {tuple(values.shape)}"
        )
    out = centres
    if keys.numel() == 0:
        return out
    order = torch.argsort(keys, stable=True)
    sorted_keys, sorted_values = keys[order], values[order].to(centres.dtype)
    # each row's key's first and past-last row, its count and its rank among them: no unique(), whose output size
    # the host would have to wait for
    first = torch.searchsorted(sorted_keys, sorted_keys)
    count = torch.searchsorted(sorted_keys, sorted_keys, right=True) - first
    rank = torch.arange(len(sorted_keys), device=keys.device) - first
    decay = 1.0 - alpha  # a Python number: a tensor made of it on a GPU would be a synchronous copy
    weight = alpha * decay ** (count - 1 - rank).to(centres.dtype)
    # a key's rows all write the same decayed centre, so which write lands does not matter
    out[sorted_keys] = out[sorted_keys] * (decay ** count.to(centres.dtype)).unsqueeze(1)
    out.index_add_(0, sorted_keys, weight.unsqueeze(1) * sorted_values)
    return out


def nearest_sense(
    centres: torch.Tensor, allowed: torch.Tensor, token_ids: torch.Tensor, projected: torch.Tensor
) -> torch.Tensor:
    """Sense [N] of each token: argmax over its allowed senses of cos(projected, centre).

    Ties (e.g. a zero ``projected`` vector) go to the lowest sense index.
    """
    cos = F.cosine_similarity(projected.unsqueeze(1), centres[token_ids], dim=-1)  # [N, S]
    return cos.masked_fill(~allowed[token_ids], float("-inf")).argmax(1)


def prune_mask(counts: torch.Tensor, active: torch.Tensor, beta: float, min_count: int = 1) -> torch.Tensor:
    """New active mask [V, S]: senses chosen in less than a share ``beta`` of their token's selections
    are switched off, for tokens selected at least ``min_count`` times; the most chosen sense stays."""
    if not 0.0 <= beta <= 1.0:
        raise ValueError(f"beta (prune share) must be in [0, 1], got {beta}")
    total = counts.sum(1, keepdim=True)
    share = counts.double() / total.clamp(min=1)
    drop = (share < beta) & (total >= min_count)
    drop.scatter_(1, counts.argmax(1, keepdim=True), False)
    return active & ~drop


class SenseState:
    """Centres, projection, queue, counts and step of the sense-aware MLM (see module docstring).

    A plain object, not an ``nn.Module``: DDP must not broadcast it as buffers (each rank applies the
    same gathered update instead), and the exported model must not contain it. ``state_dict`` /
    ``load_state_dict`` hand it to checkpoints as plain tensors.
    """

    def __init__(
        self,
        *,
        vocab_size: int,
        num_senses: int,
        hidden_size: int,
        proj_dim: int = 14,
        queue_size: int = 4096,
        refit_every: int = 1000,
        warmup_steps: int = 0,
        init_scale: float = 1e-3,
        seed: int = 0,
    ):  # host-side: the objective moves it (``to``)
        for name, value, low in [
            ("vocab_size", vocab_size, 1),
            ("num_senses", num_senses, 1),
            ("hidden_size", hidden_size, 1),
            ("proj_dim", proj_dim, 1),
            ("refit_every", refit_every, 1),
            ("warmup_steps", warmup_steps, 0),
        ]:
            if value < low:
                raise ValueError(f"{name} must be >= {low}, got {value}")
        if proj_dim > hidden_size:
            raise ValueError(f"proj_dim={proj_dim} must not exceed hidden_size={hidden_size}")
        if queue_size <= proj_dim:
            raise ValueError(f"queue_size={queue_size} must exceed proj_dim={proj_dim} to fit the projection")
        self.num_senses, self.proj_dim = num_senses, proj_dim
        self.refit_every, self.warmup_steps = refit_every, warmup_steps
        generator = torch.Generator().manual_seed(seed)
        self.centres = init_scale * torch.randn(vocab_size, num_senses, hidden_size, generator=generator)
        self.counts = torch.zeros(vocab_size, num_senses, dtype=torch.long)
        self.active = torch.ones(vocab_size, num_senses, dtype=torch.bool)
        self.queue = torch.zeros(queue_size, hidden_size)
        self.queue_filled = 0
        self.queue_next = 0
        self.proj = torch.zeros(hidden_size, proj_dim)
        self.projected_centres = torch.zeros(vocab_size, num_senses, proj_dim)  # c P, kept in step with both
        self.fitted = False
        self.last_fit_step = 0
        self.step = 0

    _TENSORS = ("centres", "counts", "active", "queue", "proj")
    _SCALARS = ("queue_filled", "queue_next", "fitted", "last_fit_step", "step")

    def to(self, device: torch.device | str) -> SenseState:
        for name in (*self._TENSORS, "projected_centres"):
            setattr(self, name, getattr(self, name).to(device))
        return self

    @property
    def single_sense(self) -> bool:
        """True during warm-up and before the first projection fit: every position uses sense 0."""
        return self.step < self.warmup_steps or not self.fitted

    def allowed(self) -> torch.Tensor:
        """[V, S] senses that may be chosen and predicted now."""
        if self.single_sense:
            only_first = torch.zeros_like(self.active)
            only_first[:, 0] = True
            return self.active & only_first
        return self.active

    def project(self, states: torch.Tensor) -> torch.Tensor:
        """z = Pᵀ h, [N, d′] (not centred, as the paper's h P); zeros before the first fit."""
        with torch.autocast(states.device.type, enabled=False):  # fp32 under bf16 autocast: it picks senses
            return states.to(self.proj.dtype) @ self.proj

    def select(self, token_ids: torch.Tensor, projected: torch.Tensor) -> torch.Tensor:
        """Sense [N] for each position: nearest allowed projected centre (always 0 in single-sense mode)."""
        if self.single_sense:
            return torch.zeros_like(token_ids)
        return nearest_sense(self.projected_centres, self.active, token_ids, projected)

    def update_queue(self, states: torch.Tensor) -> None:
        """Push ``states`` [n, d] into the FIFO ring buffer (only the last Q are kept)."""
        capacity = self.queue.shape[0]
        states = states.detach().to(self.queue.dtype)[-capacity:]
        slots = (self.queue_next + torch.arange(len(states), device=self.queue.device)) % capacity
        self.queue[slots] = states
        self.queue_next = (self.queue_next + len(states)) % capacity
        self.queue_filled = min(capacity, self.queue_filled + len(states))

    def maybe_refit_projection(self) -> bool:
        """Refit P on the queue when M steps have passed since the last fit (or none exists yet and
        the queue holds enough states); the centres stay as they are, their projections are redone."""
        due = not self.fitted or self.step - self.last_fit_step >= self.refit_every
        if not due or self.queue_filled <= self.proj_dim:
            return False
        _, self.proj = principal_components(self.queue[: self.queue_filled], self.proj_dim)
        self.projected_centres = self.centres @ self.proj
        self.fitted, self.last_fit_step = True, self.step
        return True

    def update_centres(self, token_ids: torch.Tensor, senses: torch.Tensor, states: torch.Tensor, alpha: float) -> None:
        """c[t, s] ← (1 − α) c[t, s] + α h, rows applied in order (see ``ema_update``)."""
        keys = token_ids * self.num_senses + senses
        flat = ema_update_(self.centres.view(-1, self.centres.shape[-1]), keys, states, alpha)
        self.projected_centres.view(-1, self.proj_dim)[keys] = flat[keys] @ self.proj

    def observe(self, token_ids: torch.Tensor, senses: torch.Tensor, states: torch.Tensor, alpha: float) -> bool:
        """One optimizer step's bookkeeping from the (token, sense, state) rows of every rank:
        update centres, count selections (outside single-sense mode), queue the
        states, advance the step, refit P when due. Returns whether P was refitted."""
        self.update_centres(token_ids, senses, states, alpha)
        if not self.single_sense:
            self.counts.view(-1).index_add_(0, token_ids * self.num_senses + senses, torch.ones_like(token_ids))
        self.update_queue(states)
        self.step += 1
        return self.maybe_refit_projection()

    def prune(self, beta: float, min_count: int = 1) -> int:
        """Switch off rarely chosen senses (``prune_mask``); return how many were switched off."""
        before = int(self.active.sum())
        self.active = prune_mask(self.counts, self.active, beta, min_count)
        return before - int(self.active.sum())

    def state_dict(self) -> dict[str, torch.Tensor]:
        state = {name: getattr(self, name).clone() for name in self._TENSORS}
        state.update({name: torch.tensor(int(getattr(self, name))) for name in self._SCALARS})  # host-side
        return state

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        missing = [name for name in self._TENSORS + self._SCALARS if name not in state]
        if missing:
            raise ValueError(f"sense state is missing {missing}")
        unexpected = sorted(set(state) - set(self._TENSORS + self._SCALARS))
        if unexpected:  # "mean" or "updated": saved by an older version whose centres lived in a projected space
            raise ValueError(
                f"sense state has unexpected entries {unexpected}: it was saved by an earlier "
                "distalign whose sense centres do not fit this one's (kept in the model's space)"
            )
        for name in self._TENSORS:
            current = getattr(self, name)
            if state[name].shape != current.shape:
                raise ValueError(
                    f"sense state '{name}' has shape {tuple(state[name].shape)}, expected {tuple(current.shape)}"
                )
            setattr(self, name, state[name].to(device=current.device, dtype=current.dtype).clone())
        for name in self._SCALARS:
            setattr(self, name, type(getattr(self, name))(state[name].item()))
        self.projected_centres = self.centres @ self.proj
