"""LAMB (You et al. 2020, "Large batch optimization for deep learning: training BERT in 76 minutes",
Algorithm 2), the optimizer of DICT-MLM's pre-training (Chaudhary et al. 2020, §3.1: lr 0.0016, batch 8192).

Per parameter tensor ``x`` with gradient ``g`` at step ``t``:

    m = β1 m + (1 - β1) g          v = β2 v + (1 - β2) g²
    r = m / (1 - β1^t) / (sqrt(v / (1 - β2^t)) + ε) + λ x
    x = x - η · (‖x‖ / ‖r‖) · r     (trust ratio 1 where ‖x‖ or ‖r‖ is 0)

The trust ratio uses φ(z) = z, the paper's choice in its experiments. A parameter group with ``adapt=False``
(biases and LayerNorm weights, as the reference implementation excludes them, ``train/engine.py``) takes the
plain Adam step: no trust ratio, and no weight decay when its group sets 0. No library that is kept up offers a
LAMB that runs on CPU (DeepSpeed's and apex's are fused CUDA kernels; torch-optimizer is archived), so it
is written here, against the paper. The trust ratio needs whole tensors: under ZeRO stages 1-3 DeepSpeed
hands the optimizer flat partitions, so the configuration allows LAMB only with the DDP engine or ZeRO-0.
"""

from __future__ import annotations

import torch


class Lamb(torch.optim.Optimizer):
    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.0,
    ):
        if lr <= 0 or eps <= 0 or weight_decay < 0 or not all(0 <= b < 1 for b in betas):
            raise ValueError(
                f"LAMB: lr={lr}, eps={eps} must be > 0, weight_decay={weight_decay} >= 0 and betas={betas} in [0, 1)"
            )
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay, "adapt": True})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                dtype = torch.promote_types(param.dtype, torch.float32)  # bf16 weights: moments and math in fp32
                grad = param.grad.to(dtype)
                state = self.state[param]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(param, dtype=dtype)
                    state["exp_avg_sq"] = torch.zeros_like(param, dtype=dtype)
                state["step"] += 1
                t, m, v = state["step"], state["exp_avg"], state["exp_avg_sq"]
                m.mul_(beta1).add_(grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                weights = param.to(dtype)
                update = (m / (1 - beta1**t)) / ((v / (1 - beta2**t)).sqrt() + group["eps"])
                update.add_(weights, alpha=group["weight_decay"])
                if group["adapt"]:
                    weight_norm, update_norm = weights.norm(), update.norm()
                    trust = torch.where(
                        (weight_norm > 0) & (update_norm > 0), weight_norm / update_norm, torch.ones_like(weight_norm)
                    )
                    update.mul_(trust)
                param.add_((update * -group["lr"]).to(param.dtype))
        return loss
