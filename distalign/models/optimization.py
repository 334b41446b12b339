"""What training and fine-tuning optimise alike: the parameter groups of weight decay and the gradient norm clipped
to (``distalign.train.engine``'s continued pre-training, ``distalign.transfer.finetune``'s task fine-tuning)."""

from __future__ import annotations

import torch

MAX_GRAD_NORM = 1.0  # BERT's, the Hugging Face Trainer's and XTREME's fine-tuning scripts'


# Parameters BERT, the LAMB reference and the Hugging Face Trainer keep out of weight decay (and LAMB out of
# its trust ratio): biases and normalisation weights; the patterns are the Trainer's.
NO_DECAY_PATTERNS = [r"bias", r"layernorm", r"rmsnorm", r"(?:^|\.)norm(?:$|\.)", r"_norm(?:$|\.)"]


def parameter_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """The trainable parameters in two optimizer groups: decayed (and trust-ratio adapted under LAMB) weights,
    and biases / LayerNorm weights with neither. Frozen parameters (the base model under adapters) are left
    out: they need no optimizer state."""
    from transformers.trainer_pt_utils import get_parameter_names  # the model loaded transformers

    decayed = set(get_parameter_names(model, [torch.nn.LayerNorm], NO_DECAY_PATTERNS))
    trainable = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    return [
        {"params": [p for name, p in trainable if name in decayed], "weight_decay": weight_decay},
        {"params": [p for name, p in trainable if name not in decayed], "weight_decay": 0.0, "adapt": False},
    ]
