"""Bottleneck adapters (Pfeiffer et al. 2021; Houlsby et al. 2019) for BERT/XLM-R masked LMs.

BabelBERT (Green, Ponzetto & Glavaš 2022) also specialises the encoder with adapters instead of
full fine-tuning, with adapter-transformers' ``PfeifferConfig``: one adapter per layer, on the
feed-forward sublayer. With ``A(h) = W_up · f(W_down · h + b_down) + b_up`` (``W_down``: d -> d //
reduction_factor, ``W_up`` back to d), ``x`` the sublayer's input, ``ffn`` its projected output
and ``LN`` the layer's own output LayerNorm:

    pfeiffer (default):  LN(ffn + x + A(LN(ffn + x)))   after the layer's Add & Norm, re-using its LN
    houlsby:             LN(ffn + A(ffn) + x)           before the skip connection and the LN

Pfeiffer's adapter reads the normalised layer output; its residual is the FFN output, and the
original Add & Norm is applied again around it (``original_ln_before``/``original_ln_after`` and
``residual_before_ln`` in adapter-transformers). Both are attached with forward hooks (Pfeiffer on
``layer.output.LayerNorm``, Houlsby on ``layer.output.dense``) and live as the child module
``layer.output.adapter``, so the base model's parameter names (its Hugging Face checkpoint keys)
stay untouched. Initialisation (``init``): ``bert``, adapter-transformers' default and so BabelBERT's,
draws both projections' weights from N(0, 0.02²) with zero biases; ``identity`` starts ``W_up`` and
``b_up`` at zero, so the adapted model computes exactly what the base model computes until training
moves them.

Only adapters are trained: ``add_bottleneck_adapters`` freezes every base parameter. Trainable
parameters: ``L · (2 · d · m + m + d)`` with ``m = d // reduction_factor``.

Export (no merge: an adapter is a non-linear function): ``save_pretrained_with_adapters`` writes the
frozen base model as a plain Hugging Face directory plus ``adapters.safetensors`` and
``adapters.json`` (how to rebuild them, placement included; files without one are Houlsby's, as
written before the placement was configurable); ``load_masked_lm_with_adapters`` loads such a
directory with its adapters re-attached, and any plain HF directory without them; ``attach_saved_adapters``
re-attaches them to a model with another head (transfer fine-tuning's task models).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn

from distalign.models.loading import load_masked_lm

ADAPTER_WEIGHTS = "adapters.safetensors"
ADAPTER_CONFIG = "adapters.json"


INITS = ("bert", "identity")


class BottleneckAdapter(nn.Module):
    def __init__(self, hidden_size: int, reduction_factor: int = 16, non_linearity: str = "relu", init: str = "bert"):
        from transformers.activations import ACT2FN  # here: a second of imports that only an adapter run needs

        super().__init__()
        bottleneck = hidden_size // reduction_factor
        if reduction_factor < 1 or bottleneck < 1:
            raise ValueError(f"reduction_factor={reduction_factor} must be in [1, hidden_size={hidden_size}]")
        if non_linearity not in ACT2FN:
            raise ValueError(f"non_linearity={non_linearity!r} is not one of {sorted(ACT2FN)}")
        if init not in INITS:
            raise ValueError(f"init={init!r} is not one of {INITS}")
        self.down = nn.Linear(hidden_size, bottleneck)
        self.activation = ACT2FN[non_linearity]
        self.up = nn.Linear(bottleneck, hidden_size)
        for linear in (self.down, self.up):
            nn.init.zeros_(linear.bias)
            if init == "bert" or linear is self.down:
                nn.init.normal_(linear.weight, std=0.02)
            else:  # identity: a zero up-projection, so training starts from the base model itself
                nn.init.zeros_(linear.weight)

    def bottleneck(self, hidden: torch.Tensor) -> torch.Tensor:
        """A(h) = W_up f(W_down h + b_down) + b_up."""
        return self.up(self.activation(self.down(hidden)))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden + self.bottleneck(hidden)

    # Forward hooks are bound methods, so a ``deepcopy`` of the model calls its own adapters.
    def adapt_output(self, module: nn.Module, inputs, output: torch.Tensor) -> torch.Tensor:
        """Houlsby: on the FFN's output projection, before the skip connection and the LayerNorm."""
        return self(output)

    def adapt_after_layer_norm(self, module: nn.LayerNorm, inputs, output: torch.Tensor) -> torch.Tensor:
        """Pfeiffer: ``inputs[0]`` = ffn + x, ``output`` = LN(ffn + x) -> LN(ffn + x + A(LN(ffn + x)))."""
        return F.layer_norm(
            inputs[0] + self.bottleneck(output), module.normalized_shape, module.weight, module.bias, module.eps
        )


def _transformer_layers(model: nn.Module) -> nn.ModuleList:
    encoder = getattr(getattr(model, "base_model", None), "encoder", None)
    layers = getattr(encoder, "layer", None)
    if layers is None or not all(
        hasattr(getattr(layer, "output", None), "dense") and hasattr(layer.output, "LayerNorm") for layer in layers
    ):
        raise ValueError(
            f"model: {type(model).__name__} is not a BERT/XLM-R-style encoder "
            "(expected base_model.encoder.layer[i].output.dense and .LayerNorm)"
        )
    return layers


PLACEMENTS = ("pfeiffer", "houlsby")


def add_bottleneck_adapters(
    model: nn.Module,
    reduction_factor: int = 16,
    non_linearity: str = "relu",
    placement: str = "pfeiffer",
    init: str = "bert",
) -> list[BottleneckAdapter]:
    """Attach one adapter to each layer's feed-forward sublayer (``placement``, see the module
    docstring); freeze everything else."""
    if placement not in PLACEMENTS:
        raise ValueError(f"placement={placement!r} is not one of {PLACEMENTS}")
    layers = _transformer_layers(model)
    if any(hasattr(layer.output, "adapter") for layer in layers):
        raise ValueError("model already has adapters")
    for param in model.parameters():
        param.requires_grad_(False)
    adapters = []
    for layer in layers:
        dense = layer.output.dense
        adapter = BottleneckAdapter(dense.out_features, reduction_factor, non_linearity, init).to(dense.weight.device)
        layer.output.adapter = adapter
        if placement == "pfeiffer":
            layer.output.LayerNorm.register_forward_hook(adapter.adapt_after_layer_norm)
        else:
            dense.register_forward_hook(adapter.adapt_output)
        adapters.append(adapter)
    model.adapter_config = {
        "reduction_factor": reduction_factor,
        "non_linearity": non_linearity,
        "placement": placement,
    }
    return adapters


def _adapter_names(model: nn.Module) -> set[str]:
    return {
        f"{name}.{key}"
        for name, module in model.named_modules()
        if isinstance(module, BottleneckAdapter)
        for key in module.state_dict()
    }


def adapter_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The adapters' weights, keyed by their names in ``model`` (e.g.
    ``roberta.encoder.layer.0.output.adapter.down.weight``)."""
    names = _adapter_names(model)
    return {name: value for name, value in model.state_dict().items() if name in names}


def load_adapters(model: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Copy ``state`` (from ``adapter_state_dict``) into the model's adapters; names must match exactly."""
    names = _adapter_names(model)
    missing, unexpected = sorted(names - set(state)), sorted(set(state) - names)
    if missing or unexpected:
        raise ValueError(
            f"adapter state does not fit the model: missing {missing[:3]}, unexpected {unexpected[:3]}"
            f" ({len(missing)} missing, {len(unexpected)} unexpected)"
        )
    model.load_state_dict(state, strict=False)


def write_weights_dtype(directory: Path, state_dict: dict) -> None:
    """The saved config's ``dtype`` set to that of the floating weights written, where the module's differs
    (``save_pretrained`` writes the module's: a DeepSpeed bf16 module exporting its fp32 master weights would load
    as bf16 with ``dtype="auto"``)."""
    dtypes = {value.dtype for value in state_dict.values() if value.is_floating_point()}
    config_file = directory / "config.json"
    if len(dtypes) != 1 or not config_file.is_file():
        return
    config = json.loads(config_file.read_text())
    written = str(dtypes.pop()).removeprefix("torch.")
    if config.get("dtype") != written:
        config["dtype"] = written
        config_file.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def save_pretrained_with_adapters(model: nn.Module, directory: str | Path, state_dict: dict | None = None) -> None:
    """Base model as a plain HF directory, plus ``adapters.safetensors`` and ``adapters.json``; the weights
    are ``state_dict`` when given (else the model's own)."""
    directory = Path(directory)
    state_dict = model.state_dict() if state_dict is None else state_dict
    names = _adapter_names(model)
    adapters = {name: value for name, value in state_dict.items() if name in names}
    base = {name: value for name, value in state_dict.items() if name not in adapters}
    model.save_pretrained(directory, state_dict=base)
    write_weights_dtype(directory, base)
    if adapters:
        save_file({name: value.contiguous() for name, value in adapters.items()}, str(directory / ADAPTER_WEIGHTS))
        (directory / ADAPTER_CONFIG).write_text(json.dumps(model.adapter_config))


def attach_saved_adapters(model: nn.Module, directory: str | Path) -> bool:
    """Re-attach and load the adapters saved in ``directory`` (by ``save_pretrained_with_adapters``), if it has
    any, to ``model``: the masked LM they were trained in, or the same encoder under another head (a task
    model: the adapters' names, ``<base>.encoder.layer.<i>.output.adapter.*``, are the same). As
    ``add_bottleneck_adapters``, this freezes every other parameter. Returns whether there were adapters."""
    config_file = Path(directory) / ADAPTER_CONFIG
    if not config_file.is_file():
        return False
    try:
        settings = json.loads(config_file.read_text())
        add_bottleneck_adapters(
            model, settings["reduction_factor"], settings["non_linearity"], settings.get("placement", "houlsby")
        )
    except (json.JSONDecodeError, KeyError, TypeError) as error:
        raise ValueError(f"{config_file}: not an adapter config ({error})") from error
    load_adapters(model, load_file(str(config_file.with_name(ADAPTER_WEIGHTS))))
    return True


def load_masked_lm_with_adapters(name_or_path: str) -> nn.Module:
    """``load_masked_lm``, then the adapters saved beside it (if any) re-attached and loaded."""
    model = load_masked_lm(name_or_path)
    attach_saved_adapters(model, name_or_path)
    return model
