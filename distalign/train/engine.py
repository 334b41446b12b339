"""The two distributed engines behind one small interface: PyTorch DDP or DeepSpeed ZeRO.

``engine.module`` is the unwrapped ``TrainingModule`` (for evaluation and export);
``engine.step(batch)`` runs forward, backward and the optimizer step and returns the losses.
"""

from __future__ import annotations

import contextlib
import inspect
from pathlib import Path

import torch
import yaml
from torch.nn.parallel import DistributedDataParallel

from distalign.checkpoint import DEEPSPEED_DIR, OPTIMIZER_FILE
from distalign.config import TrainConfig
from distalign.models.optimization import MAX_GRAD_NORM, parameter_groups
from distalign.objectives.base import edit_in_place
from distalign.train.lamb import Lamb
from distalign.train.step_timing import Mark, no_mark

# DDP sends its buffers from rank 0 before every forward unless told not to; the models' buffers (position and
# token type ids) never change. PyTorch 2.13 renamed the option (the GPU image's 2.11 has the old name only).
NO_BUFFER_SYNC = (
    {"forward_sync_buffers": False}
    if "forward_sync_buffers" in inspect.signature(DistributedDataParallel).parameters
    else {"broadcast_buffers": False}
)


def fused_on(groups: list[dict]) -> bool | None:
    """AdamW's ``fused`` for these parameter groups: True where every parameter is on a CUDA device (one kernel
    for the whole update instead of a few per tensor; PyTorch's AdamW documentation: fused is the fastest
    implementation on CUDA), None (PyTorch's default, the multi-tensor ``foreach`` path) elsewhere. Under
    DeepSpeed the optimizer later steps ZeRO's flat fp32 partitions, on the same device."""
    params = [p for group in groups for p in group["params"]]
    return True if params and all(p.device.type == "cuda" for p in params) else None


def compile_layers(model: torch.nn.Module) -> None:
    """``torch.compile`` each transformer layer of the masked LM in place (PyTorch's regional compilation: the
    repeated block is compiled once and reused; the objectives' data-dependent code, such as selecting the
    labelled positions, stays eager). Parameter names and checkpoints are unchanged. Batch widths vary from
    step to step (trimmed to the longest row), so the layers are compiled for dynamic shapes."""
    encoder = model.masked_lm.base_model
    layers = getattr(getattr(encoder, "encoder", None), "layer", None)
    for layer in layers if layers is not None else [encoder]:
        layer.compile(dynamic=True)


def _optimizer_and_schedule(model: torch.nn.Module, cfg: TrainConfig, max_steps: int):
    from transformers import get_constant_schedule_with_warmup, get_linear_schedule_with_warmup  # the model loaded it

    groups = parameter_groups(model, cfg.weight_decay)
    if cfg.optimizer == "lamb":
        optimizer = Lamb(groups, lr=cfg.lr, weight_decay=cfg.weight_decay)
    else:
        for group in groups:
            group.pop("adapt", None)  # LAMB's option; AdamW has no trust ratio
        optimizer = torch.optim.AdamW(groups, lr=cfg.lr, weight_decay=cfg.weight_decay, fused=fused_on(groups))
    if cfg.lr_schedule == "constant":  # BabelBERT's authors: a constant learning rate
        schedule = get_constant_schedule_with_warmup(optimizer, cfg.warmup_steps)
    else:
        schedule = get_linear_schedule_with_warmup(optimizer, cfg.warmup_steps, max_steps)
    return optimizer, schedule


class DDPEngine:
    def __init__(
        self,
        model: torch.nn.Module,
        cfg: TrainConfig,
        max_steps: int,
        find_unused_parameters: bool,
        device: torch.device,
    ):
        self.module = model.to(device)
        self.wrapped = DistributedDataParallel(
            model,
            device_ids=[device.index] if device.type == "cuda" else None,
            find_unused_parameters=find_unused_parameters,
            **NO_BUFFER_SYNC,
        )
        self.optimizer, self.schedule = _optimizer_and_schedule(model, cfg, max_steps)
        self.grad_norm: torch.Tensor | None = None  # of the last step's gradients, before clipping
        self.bf16 = cfg.precision == "bf16"

    def step(self, micro_batches: list, mark: Mark = no_mark) -> dict[str, torch.Tensor]:
        """Forward and backward on each micro-batch (gradients all-reduced only on the last), then one
        optimizer step; returns the losses averaged over the micro-batches (detached). ``mark(phase)`` is
        called at the end of each phase (``distalign.train.step_timing``)."""
        device_type = next(self.module.parameters()).device.type
        total: dict[str, torch.Tensor] = {}
        for i, batch in enumerate(micro_batches):
            last = i == len(micro_batches) - 1
            with (
                contextlib.nullcontext() if last else self.wrapped.no_sync(),
                torch.autocast(device_type, dtype=torch.bfloat16) if self.bf16 else contextlib.nullcontext(),
            ):
                losses = self.wrapped(batch)
            (losses["loss"] / len(micro_batches)).backward()
            accumulate(total, losses, len(micro_batches))
        mark("forward_backward")
        # the norm before clipping, left on the device (logged as Train/grad_norm, read when the window is logged)
        self.grad_norm = torch.nn.utils.clip_grad_norm_(self.module.parameters(), MAX_GRAD_NORM).detach()
        self.optimizer.step()
        self.schedule.step()
        self.optimizer.zero_grad(set_to_none=True)
        mark("optimizer")
        return total

    @property
    def lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def save(self, directory: Path, rank: int) -> None:
        if rank == 0:
            torch.save(
                {"optimizer": self.optimizer.state_dict(), "schedule": self.schedule.state_dict()},
                directory / OPTIMIZER_FILE,
            )

    def load(self, directory: Path) -> None:
        """Optimizer and schedule; the weights were loaded from the checkpoint's model directory."""
        state = torch.load(directory / OPTIMIZER_FILE, map_location="cpu", weights_only=True)  # no code runs
        self.optimizer.load_state_dict(state["optimizer"])
        self.schedule.load_state_dict(state["schedule"])

    @contextlib.contextmanager
    def full_weights(self):
        yield

    edit_parameters = staticmethod(edit_in_place)  # the module holds the fp32 weights the optimizer steps

    def exported_weights(self) -> dict | None:
        """None: every rank holds the whole module; rank 0 exports its own state dict."""
        return None


def accumulate(total: dict[str, torch.Tensor], losses: dict[str, torch.Tensor], count: int) -> None:
    """Add one micro-batch's detached losses / ``count`` into ``total``."""
    for name, value in losses.items():
        total[name] = total.get(name, 0) + value.detach() / count


def merged(base: dict, override: dict) -> dict:
    """``base`` with ``override`` laid over it, nested mappings merged key by key."""
    out = dict(base)
    for key, value in override.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def deepspeed_settings(cfg: TrainConfig) -> dict:
    """distalign's DeepSpeed config, then ``train.deepspeed_config_file``, then ``train.deepspeed_config``.

    ZeRO-1/2 keep DeepSpeed's defaults (``deepspeed/runtime/zero/config.py``, 0.19.8): contiguous gradients, buckets
    of 5e8 elements for the gradients' reduction and the weights' gather, and ``overlap_comm`` off (on only for
    ZeRO-3). For XLM-R base (278M parameters) one bucket holds every gradient, so the reduction runs once, after
    the backward pass; on one GPU there is nothing to overlap it with. Beyond that (no-op) communication, a bf16
    ZeRO-2 step copies each gradient into the bucket, flattens it to an fp32 partition, steps AdamW on one flat
    tensor and copies the result back to the bf16 weights: a few passes over the parameters' memory, against DDP's
    bf16 autocast re-casting its fp32 weights every forward. On several GPUs ``overlap_comm: true`` with a smaller
    ``reduce_bucket_size`` (e.g. 5e7) lets the reduction run behind the backward pass (``train.deepspeed_config``).
    """
    settings = {
        # The loop feeds its own batches; DeepSpeed requires the key but does not batch here.
        "train_micro_batch_size_per_gpu": cfg.constraint_batch_size,
        "gradient_accumulation_steps": cfg.grad_accum_steps,
        "gradient_clipping": MAX_GRAD_NORM,
        "zero_optimization": {"stage": cfg.zero_stage},
        "bf16": {"enabled": cfg.precision == "bf16"},
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
    }
    if cfg.deepspeed_config_file:
        settings = merged(settings, yaml.safe_load(Path(cfg.deepspeed_config_file).read_text()) or {})
    return merged(settings, cfg.deepspeed_config)


def distalign_checkpoint_engine(config):
    """DeepSpeed's torch checkpoint engine, changed twice:

    - it loads with ``weights_only=True``, so a tampered shard on shared storage cannot run code. Besides tensors and
      plain containers, DeepSpeed's ZeRO checkpoints hold only the few classes of its own allowed here (found by
      loading ZeRO-2 and ZeRO-3 checkpoints);
    - it saves DeepSpeed's model states without the module's weights: the checkpoint's exported model
      (``distalign.checkpoint.MODEL_DIR``, the fp32 master weights) holds them already, and a resume builds the
      module from it (``module_from_export``); ZeRO's optimizer shards restore the trained parameters' master
      copies. At 560M parameters that is 1.1-2.2 GB less for rank 0 to write and every node to read."""
    from deepspeed.runtime.checkpoint_engine.torch_checkpoint_engine import TorchCheckpointEngine
    from deepspeed.runtime.fp16.loss_scaler import DynamicLossScaler, LossScaler
    from deepspeed.runtime.zero.config import ZeroStageEnum
    from deepspeed.utils.tensor_fragment import fragment_address

    allowed = [LossScaler, DynamicLossScaler, ZeroStageEnum, fragment_address]

    class DistalignCheckpointEngine(TorchCheckpointEngine):
        def save(self, state_dict, path: str):
            if "module" in state_dict:  # the model states (the optimizer shards have no module)
                state_dict = {**state_dict, "module": {}}
            super().save(state_dict, path)

        def load(self, path: str, map_location=None):
            with torch.serialization.safe_globals(allowed):
                return torch.load(path, map_location=map_location, weights_only=True)

    return DistalignCheckpointEngine(config)


def module_from_export(src: dict, dst: torch.nn.Module) -> None:
    """DeepSpeed's ``custom_load_fn``, which loads nothing: the module was built from the checkpoint's exported
    model (``distalign_checkpoint_engine`` saves no weights in the model states; those of older checkpoints are the
    same weights), and ZeRO-1/2 set the trained ones from their master copies (``DeepSpeedEngine.load``)."""


class DeepSpeedEngine:
    def __init__(self, model: torch.nn.Module, cfg: TrainConfig, max_steps: int):
        import deepspeed

        optimizer, schedule = _optimizer_and_schedule(model, cfg, max_steps)
        # A torch optimizer avoids compiling DeepSpeed's fused Adam on CPU.
        self.engine, _, _, _ = deepspeed.initialize(
            model=model, optimizer=optimizer, lr_scheduler=schedule, config=deepspeed_settings(cfg)
        )
        self.module = self.engine.module
        self.zero_stage = cfg.zero_stage
        from deepspeed.runtime.checkpoint_engine.torch_checkpoint_engine import TorchCheckpointEngine

        if type(self.engine.checkpoint_engine) is TorchCheckpointEngine:  # the default; others load their own way
            self.engine.checkpoint_engine = distalign_checkpoint_engine(self.engine._config)

    def step(self, micro_batches: list, mark: Mark = no_mark) -> dict[str, torch.Tensor]:
        """DeepSpeed accumulates over ``gradient_accumulation_steps`` micro-batches (its backward scales the
        loss) and steps the optimizer at the boundary; returns the averaged losses (detached)."""
        total: dict[str, torch.Tensor] = {}
        for batch in micro_batches:
            losses = self.engine(batch)
            self.engine.backward(losses["loss"])
            mark("forward_backward")
            self.engine.step()
            mark("optimizer")
            accumulate(total, losses, len(micro_batches))
        return total

    @property
    def lr(self) -> float:
        return float(self.engine.get_lr()[0])

    @property
    def grad_norm(self) -> torch.Tensor | float | None:
        """The last step's global gradient norm before clipping: its ZeRO optimizers keep it; None at ZeRO 0, where
        DeepSpeed clips a torch optimizer's gradients without keeping the norm."""
        norm = self.engine.get_global_grad_norm()
        return norm.detach() if isinstance(norm, torch.Tensor) else norm

    def save(self, directory: Path, rank: int) -> None:
        # Every rank writes its own ZeRO shards; rank 0 also writes the model states, without the weights (frozen
        # ones included: the exported model has them all, ``distalign_checkpoint_engine``)
        self.engine.save_checkpoint(str(directory / DEEPSPEED_DIR), tag="state", exclude_frozen_parameters=True)

    def load(self, directory: Path) -> None:
        self.engine.load_checkpoint(str(directory / DEEPSPEED_DIR), tag="state", custom_load_fn=module_from_export)
        optimizer = self.engine.optimizer
        if self.zero_stage < 3 and hasattr(optimizer, "update_lp_params"):
            # the module's weights from the master copies just loaded (ZeRO-1/2, DeepSpeed's bf16 optimizer: their
            # loads leave the module's weights to the model states, which hold none); all ranks gather them
            optimizer.update_lp_params()

    def exported_weights(self) -> dict | None:
        """The module's state dict for rank 0 to export (None where the module's own is it; all ranks enter).

        In bf16 the module holds bf16 copies of the weights: the exported ones are DeepSpeed's fp32 master
        weights instead (a bf16 export would load as bf16 with ``dtype="auto"``, and a fine-tuning or another
        run would then step AdamW on bf16 weights); frozen parameters and buffers, which have no master copy,
        are upcast. Under ZeRO-3 everything is gathered to rank 0 first (DeepSpeed's consolidation, layer by
        layer); other ranks get None."""
        bf16 = self.engine.bfloat16_enabled()
        if self.zero_stage != 3 and not bf16:
            return None
        from deepspeed.utils import safe_get_full_fp32_param

        chief = not torch.distributed.is_initialized() or torch.distributed.get_rank() == 0
        state = (
            self.engine._zero3_consolidated_16bit_state_dict()
            if self.zero_stage == 3
            else (self.module.state_dict() if chief else None)
        )
        # every rank gathers each master weight (a collective), in the same order; rank 0 keeps them on the host,
        # one at a time (the whole fp32 model is not held on a GPU)
        keeps = state is not None
        masters = {}
        for name, parameter in self.module.named_parameters(remove_duplicate=False) if bf16 else ():
            master = safe_get_full_fp32_param(parameter) if parameter.requires_grad else None
            if keeps and master is not None:
                masters[name] = master.detach().to("cpu")
        if not keeps:  # not rank 0
            return None

        def exported(name: str, value):  # (an objective's extra state is no tensor: kept as it is)
            if not isinstance(value, torch.Tensor):
                return value
            value = masters.get(name, value)
            return value.detach().to("cpu", torch.float32 if value.is_floating_point() else value.dtype)

        return {name: exported(name, value) for name, value in state.items()}

    @contextlib.contextmanager
    def edit_parameters(self, parameters: list[torch.nn.Parameter]):
        """``distalign.objectives.base.EditParameters``: the parameters' fp32 master values, whole (gathered on
        every rank: all ranks enter and must change them alike), then written back to the master copies and to
        the module's (bf16, or ZeRO-3-partitioned) weights. A change to the module's weights alone would be
        undone by the next step, which copies the master weights over them."""
        import deepspeed
        from deepspeed.utils import safe_get_full_fp32_param, safe_set_full_fp32_param

        masters = [safe_get_full_fp32_param(p) for p in parameters]
        if any(master is None for master in masters):  # no master copy (no ZeRO, fp32): the weights themselves
            with edit_in_place(parameters) as values:
                yield values
            return
        with torch.no_grad():
            yield masters
            for parameter, master in zip(parameters, masters):
                safe_set_full_fp32_param(parameter, master)
            gathered = (
                deepspeed.zero.GatheredParameters(parameters, modifier_rank=0)
                if self.zero_stage == 3
                else contextlib.nullcontext()
            )
            with gathered:  # under ZeRO-3 rank 0's whole weights are partitioned back to every rank on leaving
                for parameter, master in zip(parameters, masters):
                    parameter.data.copy_(master.view_as(parameter.data))

    @contextlib.contextmanager
    def full_weights(self):
        """Gather ZeRO-3 partitions on every rank, for in-loop evaluation (all ranks enter)."""
        if self.zero_stage == 3:
            import deepspeed

            with deepspeed.zero.GatheredParameters(list(self.module.parameters()), modifier_rank=None):
                yield
        else:
            yield


def build_engine(model: torch.nn.Module, cfg: TrainConfig, max_steps: int, uses_lm_head: bool, device: torch.device):
    """DDP or DeepSpeed over the initialised process group; the model ends up on ``device``; the LR schedule
    spans ``max_steps`` (the run's schedule, not ``cfg.max_steps``: ``train.epochs`` may set it)."""
    if cfg.torch_compile:
        compile_layers(model)
    if cfg.engine == "deepspeed":
        return DeepSpeedEngine(model.to(device), cfg, max_steps)
    # Without an objective that trains the LM head it gets no gradient, which DDP must be told about.
    return DDPEngine(model, cfg, max_steps, find_unused_parameters=not uses_lm_head, device=device)
