"""Peak GPU memory per GPU of one training step, per objective (``distalign bench memory``): what an objective
needs before a GPU is rented for it.

Per model (XLM-R base, large), objective and engine, the bytes of one GPU in four parts:

- model states: the standard ZeRO accounting (Rajbhandari et al. 2020, §3), bytes per trainable parameter:
  DDP with bf16 autocast over fp32 weights 4 (weight) + 4 (gradient) + 8 (AdamW's moments); ZeRO-2 in bf16
  2 + (2 + 12) / N (gradients, fp32 master weights and moments partitioned over N GPUs); ZeRO-3 (2 + 2 + 12) / N.
  The objective's own parameters (the sense-aware output table, DICT-MLM's language embeddings and head, TLM's
  language embeddings) are trainable parameters of the same module and are counted the same way.
- objective state: the objective's buffers and the plain tensors it keeps (sense centres and their projections,
  the translation table, ALIGN-MLM's dictionary ids), sized from the objective its own class builds; every rank
  holds all of it.
- engine buffers (formulas): DDP's gradient buckets (4 bytes per trainable parameter: distalign keeps DDP's
  default ``gradient_as_bucket_view=False``, a second fp32 copy of the gradients); ZeRO-2's reduction bucket
  (DeepSpeed's default 5e8 elements, bf16); ZeRO-3's gathered parameters (the largest module, in bf16, and the
  5e7-element prefetch bucket).
- activations: the peak of the bytes live during one forward and backward of the real objective on the real model,
  traced without computing (``trace_step``), parameters' gradients left out (counted above).

The trace runs on CPU: floating-point tensors are fake (``FakeTensorMode``: shapes and dtypes, no data), integer and
boolean tensors are real, so the labelled positions a mask selects (``hidden[labels != -100]``) have their real count.
Autocast is CPU's bf16 autocast (its lists differ from CUDA's in a few ops, e.g. layer norm keeps its input dtype);
the CUDA context, cuBLAS workspaces and the allocator's fragmentation are not counted: keep headroom.
"""

from __future__ import annotations

# host-side module: it builds its inputs and models on the CPU (fake floating-point tensors), never on a GPU
import contextlib
import dataclasses
import math
import weakref
from dataclasses import dataclass
from pathlib import Path

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils._pytree import tree_leaves, tree_map

from distalign.objectives.align_mlm import AlignObjective
from distalign.objectives.base import ObjectiveContext
from distalign.objectives.mlm import IGNORE_INDEX
from distalign.objectives.registry import OBJECTIVES
from distalign.objectives.sense_aware import SenseAwareObjective
from distalign.train.module import TrainingModule

GB = 1e9
MODELS = {  # XLM-R's configs (Conneau et al. 2020; the Hugging Face checkpoints' config.json)
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    "large": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
}
XLMR = dict(
    vocab_size=250002,
    max_position_embeddings=514,
    type_vocab_size=1,
    layer_norm_eps=1e-5,
    pad_token_id=1,
    bos_token_id=0,
    eos_token_id=2,
)
# Each row's objectives (weight 1 each) and their config fields; ALIGN-MLM's term reads no batch: it runs beside MLM
ROWS = {
    "mlm": {"mlm": {}},
    "tlm": {"tlm": {}},
    "align (+ mlm)": {"mlm": {}, "align": {}},
    "dict_mlm": {"dict_mlm": {}},
    "sense_aware": {"sense_aware": {}},
    "lexical": {"lexical": {}},
    "static (mse)": {"static": {"loss": "mse"}},
    "static (dcca)": {"static": {"loss": "dcca"}},
}
LANGUAGES = 10  # of the run: rows of DICT-MLM's and TLM's language tables
DICTIONARY_PAIRS = 20_000  # ALIGN-MLM's dictionary (every pair each step), sense-aware's translations
WORD_TOKENS = 3  # tokens of an ALIGN-MLM dictionary word (padded width)
MASK_SHARE = 0.15  # labelled share of the tokens (whole-word masking of 15 % of the words)
# bytes per trainable parameter: (not partitioned, partitioned over the N GPUs)
ENGINES = {"ddp": (4 + 4 + 8, 0), "zero2": (2, 2 + 12), "zero3": (0, 2 + 2 + 12)}
ZERO_REDUCE_BUCKET = 5e8  # DeepSpeed 0.19.8's reduce_bucket_size (elements)
ZERO3_PREFETCH_BUCKET = 5e7  # its stage3_prefetch_bucket_size
HEADROOM = 0.10


class LiveBytes(TorchDispatchMode):
    """Counts every storage an op returns from its creation until it is freed, as an event list.

    With ``fake`` (a ``FakeTensorMode`` entered below this mode) the step runs without computing: an op on
    integer or boolean tensors only runs for real (masks, labels, ids: small, and their values decide shapes),
    every other op on fake tensors. A boolean index is turned into the positions it selects before the op (all
    positions for a fake mask), and a fake scalar read on the host (``if mask.any()``) reads as true.
    """

    def __init__(self, fake=None):
        super().__init__()
        self.fake = fake
        self.serials: dict[int, int] = {}  # id(storage) of a live counted storage -> its serial
        self.events: list[tuple[int, int]] = []  # (serial, +bytes at allocation / -bytes when freed)
        self.ignored: set[int] = set()  # ids of storages that existed before (weights, state)

    def ignore(self, tensors) -> None:
        for tensor in tensors:
            storage = tensor.untyped_storage()
            self.ignored.add(id(storage))
            weakref.finalize(storage, self.ignored.discard, id(storage))

    def count(self, tensor: torch.Tensor) -> None:
        storage = tensor.untyped_storage()
        key = id(storage)
        if key in self.serials or key in self.ignored:
            return
        serial, size = len(self.events), storage.nbytes()
        self.serials[key] = serial
        self.events.append((serial, size))
        weakref.finalize(storage, self._freed, key, serial, size)

    def _freed(self, key: int, serial: int, size: int) -> None:
        self.serials.pop(key, None)
        self.events.append((serial, -size))

    def serial_of(self, tensor: torch.Tensor) -> int | None:
        return self.serials.get(id(tensor.untyped_storage()))

    def peak(self, leave_out: set[int] = frozenset()) -> int:
        """The most bytes live at once, the storages of serials ``leave_out`` not counted."""
        live = peak = 0
        for serial, delta in self.events:
            if serial not in leave_out:
                live += delta
                peak = max(peak, live)
        return peak

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = self._run(func, args, kwargs or {})
        for tensor in tree_leaves(out):
            if isinstance(tensor, torch.Tensor):
                self.count(tensor)
        return out

    def _run(self, func, args, kwargs):
        if self.fake is None:
            return func(*args, **kwargs)
        tensors = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        any_fake = any(self._is_fake(t) for t in tensors)
        if func is torch.ops.aten._local_scalar_dense.default and any_fake:
            return {torch.bool: True}.get(args[0].dtype, 1)
        if any(
            isinstance(a, (list, tuple)) and any(isinstance(t, torch.Tensor) and t.dtype == torch.bool for t in a)
            for a in args
        ):
            args = tuple(self._positions(a) if isinstance(a, (list, tuple)) else a for a in args)
        if not any_fake and (tensors or kwargs.get("dtype") in INTEGER_TYPES):
            with _disable_current_modes():  # the integer side runs for real
                return func(*args, **kwargs)
        return func(*args, **kwargs)  # to the fake mode below

    def _is_fake(self, tensor: torch.Tensor) -> bool:
        return self.fake.is_our_fake(tensor)

    def _positions(self, indices):
        """Boolean masks of an index list as the long positions they select (a fake mask: every position)."""
        out = []
        for index in indices:
            if isinstance(index, torch.Tensor) and index.dtype == torch.bool:
                with _disable_current_modes():
                    mask = torch.ones(index.shape, dtype=torch.bool) if self._is_fake(index) else index
                    out.extend(mask.nonzero().unbind(1))
            else:
                out.append(index)
        return out


INTEGER_TYPES = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def xlmr(model: str, **overrides):
    """The model's config, attention dropout left to the kernel: on a GPU, SDPA's fused kernels drop attention
    weights inside the kernel and keep none of them, while on CPU attention with dropout falls back to the math
    path, which keeps [B, heads, T, T] probabilities and masks per layer (twice the step's activations at 512
    tokens). The hidden dropouts, which keep [B, T, d] masks on a GPU too, stay."""
    from transformers import XLMRobertaConfig

    return XLMRobertaConfig(
        **(XLMR | MODELS.get(model, {}) | {"attention_probs_dropout_prob": 0.0} | overrides), attn_implementation="sdpa"
    )


def synthetic_dictionary(vocab: int, max_translations: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """ALIGN-MLM's dictionary ids (src, tgt [pairs, WORD_TOKENS]) and sense-aware's translation table
    ([vocab, max_translations], one translation for DICTIONARY_PAIRS tokens), in place of the run's word pairs."""
    generator = torch.Generator().manual_seed(seed)
    src, tgt = (torch.randint(3, vocab, (DICTIONARY_PAIRS, WORD_TOKENS), generator=generator) for _ in "st")
    table = torch.full((vocab, max_translations), -1, dtype=torch.long)
    table[torch.randint(3, vocab, (DICTIONARY_PAIRS,), generator=generator), 0] = torch.randint(
        3, vocab, (DICTIONARY_PAIRS,), generator=generator
    )
    return src, tgt, table


def build_objectives(
    row: dict[str, dict], masked_lm: torch.nn.Module, dictionary: tuple[torch.Tensor, ...], seed: int = 0
) -> dict[str, torch.nn.Module]:
    """The row's objectives as ``TrainingRecipe.setup`` builds them (``plugin.build``), from the
    ``synthetic_dictionary`` where the build reads the run's word pairs through a tokenizer (ALIGN-MLM, sense-aware)."""
    context = ObjectiveContext(masked_lm, None, [f"l{i}" for i in range(LANGUAGES)], None, seed)
    src, tgt, table = dictionary
    built = {}
    for name, fields in row.items():
        plugin = OBJECTIVES[name]
        cfg = plugin.Config(**fields)
        if plugin is AlignObjective:
            with unset_fake_temporarily():  # its dictionary's rows are made on the host, from the real ids
                built[name] = AlignObjective(src, tgt, cfg.pairs_per_step, seed)
        elif plugin is SenseAwareObjective:
            fields = {
                f.name: getattr(cfg, f.name)
                for f in dataclasses.fields(cfg)
                if f.name not in ("weight", "mask_prob", "max_translations")
            }
            built[name] = SenseAwareObjective(
                masked_lm=masked_lm, translation_table=table[:, : cfg.max_translations], **fields, seed=seed
            )
        else:
            built[name] = plugin.build(cfg, context)
    return built


def to_bf16(model: torch.nn.Module) -> None:
    """``model.to(torch.bfloat16)`` (DeepSpeed's bf16 module) by replacing each floating parameter and buffer, tied
    ones once: fake tensors cannot be swapped in place."""
    done: dict[int, torch.Tensor] = {}
    for module in model.modules():
        for table, make in (
            (module._parameters, lambda t, p: torch.nn.Parameter(t, p.requires_grad)),
            (module._buffers, lambda t, p: t),
        ):
            for name, value in table.items():
                if value is not None and value.is_floating_point():
                    if id(value) not in done:
                        done[id(value)] = make(value.detach().to(torch.bfloat16), value)
                    table[name] = done[id(value)]


def synthetic_batches(
    objectives: dict[str, torch.nn.Module], sequences: int, length: int, vocab: int, hidden: int, seed: int = 0
) -> dict[str, dict[str, torch.Tensor]]:
    """Full rows (no padding) of every stream the objectives read, ``MASK_SHARE`` of the tokens labelled; a pair
    stream (lexical) holds ``sequences / 2`` pairs, so every objective's encoder sees ``sequences`` rows."""
    generator = torch.Generator().manual_seed(seed)
    shape = (sequences, length)

    def ids(rows: int = sequences):
        return torch.randint(3, vocab, (rows, length), generator=generator)

    ones = torch.ones(shape, dtype=torch.long)
    labelled = torch.zeros(sequences * length, dtype=torch.bool)
    labelled[torch.randperm(sequences * length, generator=generator)[: round(MASK_SHARE * sequences * length)]] = True
    labels = torch.where(labelled.view(shape), ids(), IGNORE_INDEX)
    lang = torch.randint(0, LANGUAGES, shape, generator=generator)
    word_mask = torch.zeros(shape, dtype=torch.long)
    word_mask[:, 1:4] = 1  # a word of 3 subwords after <s>
    streams = {
        "corpus": {
            "masked_ids": ids(),
            "attention_mask": ones,
            "labels": labels,
            "lang_ids": lang,
            "label_lang_ids": torch.where(labels != IGNORE_INDEX, lang, IGNORE_INDEX),
            "word_ids": ones,
        },
        "parallel": {
            "masked_ids": ids(),
            "attention_mask": ones,
            "labels": labels,
            "lang_ids": lang,
            "positions": torch.arange(length).repeat(sequences, 1),
        },
        "constraints": {
            f"{key}{side}": value[: sequences // 2]
            for side in (1, 2)
            for key, value in (
                ("input_ids", ids()),
                ("attention_mask", ones),
                ("word_mask", word_mask),
                ("gloss_mask", torch.zeros_like(word_mask)),
            )
        }
        | {"synset": torch.arange(sequences // 2)},
        "static": {
            "input_ids": ids(),
            "attention_mask": ones,
            "word_mask": word_mask,
            "vector": torch.randn(sequences, hidden, generator=generator),
        },
    }
    return {objective.stream: streams[objective.stream] for objective in objectives.values()}


def state_tensors(objective: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The objective's tensors outside its parameters: buffers, tensor attributes, and the tensors of plain
    objects it holds (the sense state), by name."""
    found = dict(objective.named_buffers())
    for module_name, module in objective.named_modules():
        for name, value in vars(module).items():
            prefix = f"{module_name}.{name}".lstrip(".")
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                found[prefix] = value
            elif not name.startswith("_") and hasattr(value, "__dict__") and not isinstance(value, torch.nn.Module):
                found |= {f"{prefix}.{k}": v for k, v in vars(value).items() if isinstance(v, torch.Tensor)}
    return found


def nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


@dataclass
class Trace:
    """One objective row's step on one model, in one precision."""

    model_params: int  # trainable parameters of the masked LM
    objective_params: int  # trainable parameters of the objectives
    largest_module: int  # parameters of the largest module (what ZeRO-3 gathers at once)
    state_bytes: int  # objective state outside the optimizer
    activation_bytes: int  # peak of the step's live tensors, parameters' gradients left out
    peak_bytes: int  # the same with the gradients


@dataclass
class Step:
    """A built training module and its batches, ready for one step."""

    model: TrainingModule
    batches: dict[str, dict[str, torch.Tensor]]
    bf16_weights: bool
    fake_mode: object  # the FakeTensorMode the model was built in, or None

    def run(self) -> None:
        """Forward (under bf16 autocast for fp32 weights, as ``DDPEngine.step``) and backward."""
        autocast = contextlib.nullcontext() if self.bf16_weights else torch.autocast("cpu", dtype=torch.bfloat16)
        with autocast:
            loss = self.model(self.batches)["loss"]
        loss.backward()

    def states(self) -> dict[str, torch.Tensor]:
        return {
            f"{name}.{key}": t
            for name, objective in self.model.objectives.items()
            for key, t in state_tensors(objective).items()
        }


def build_step(
    config, row: dict[str, dict], sequences: int, length: int, bf16_weights: bool, fake: bool = True, seed: int = 0
) -> Step:
    """``TrainingModule`` with the row's objectives on a masked LM of ``config``, fp32 weights (DDP) or bf16 ones
    (DeepSpeed's bf16 module). ``fake``: floating weights and state are fake tensors; else real (the validation's
    reference on a small model)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from transformers import XLMRobertaForMaskedLM

    fake_mode = FakeTensorMode(allow_non_fake_inputs=True) if fake else None
    torch.manual_seed(seed)
    dictionary = synthetic_dictionary(config.vocab_size, SenseAwareObjective.Config.max_translations, seed)
    with fake_mode or contextlib.nullcontext():  # the integer tables above stay real
        masked_lm = XLMRobertaForMaskedLM(config).train()  # as the recipe trains it: dropout's masks count
        objectives = build_objectives(row, masked_lm, dictionary, seed)
        model = TrainingModule(masked_lm, objectives, {name: 1.0 for name in objectives})
        if bf16_weights:
            to_bf16(model)  # the sense state (no module) stays fp32, as under DeepSpeed
    for objective in objectives.values():
        if isinstance(objective, SenseAwareObjective):  # after warm-up: the senses are chosen (the larger step)
            objective.sense_state.step, objective.sense_state.fitted = objective.sense_state.warmup_steps, True
    batches = synthetic_batches(objectives, sequences, length, config.vocab_size, config.hidden_size, seed)
    if bf16_weights:
        batches = tree_map(lambda t: t.bfloat16() if t.is_floating_point() else t, batches)
    return Step(model, batches, bf16_weights, fake_mode)


def trace_step(
    config, row: dict[str, dict], sequences: int, length: int, bf16_weights: bool, fake: bool = True, seed: int = 0
) -> Trace:
    """One step (``build_step``, ``Step.run``) counted by ``LiveBytes``: the batches from the start, the weights and
    the objective state not (they are counted apart)."""
    step = build_step(config, row, sequences, length, bf16_weights, fake, seed)
    model, states = step.model, step.states()
    tracker = LiveBytes(step.fake_mode)
    tracker.ignore([*model.parameters(), *states.values()])
    for tensor in tree_leaves(step.batches):
        tracker.count(tensor)
    with step.fake_mode or contextlib.nullcontext(), tracker:
        step.run()
        gradients = {tracker.serial_of(p.grad) for p in model.parameters() if p.grad is not None}

    def trainable(module: torch.nn.Module) -> int:
        return sum(p.numel() for p in module.parameters() if p.requires_grad)

    largest = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules())
    return Trace(
        trainable(model.masked_lm),
        trainable(model.objectives),
        largest,
        sum(nbytes(t) for t in {id(t): t for t in states.values()}.values()),
        tracker.peak(gradients - {None}),
        tracker.peak(),
    )


def model_state_bytes(params: int, engine: str, gpus: int) -> float:
    """Weights, gradients and optimizer state of ``params`` trainable parameters on one GPU (the ZeRO accounting)."""
    whole, partitioned = ENGINES[engine]
    return params * (whole + partitioned / gpus)


def engine_buffer_bytes(trace: Trace, engine: str) -> float:
    params = trace.model_params + trace.objective_params
    if engine == "ddp":
        return 4 * params  # the fp32 gradient buckets
    if engine == "zero2":
        return 2 * min(ZERO_REDUCE_BUCKET, params)
    return 2 * (trace.largest_module + ZERO3_PREFETCH_BUCKET)


@dataclass(kw_only=True)
class Row:
    model: str
    objective: str
    engine: str
    model_states: float  # bytes
    objective_states: float  # the objective's parameters' weights, gradients and optimizer state
    objective_state: float  # its state outside the optimizer
    engine_buffers: float
    activations: float
    per_sequence: float  # activation bytes per sequence (the slope between two batch sizes)
    sequences: int

    @property
    def total(self) -> float:
        return self.model_states + self.objective_states + self.objective_state + self.engine_buffers + self.activations

    def fixed(self) -> float:
        """The bytes that do not grow with the batch."""
        return self.total - self.per_sequence * self.sequences


def measure(
    models: list[str], sequences: int, length: int, gpus: int, configs: dict | None = None, progress=lambda line: None
) -> list[Row]:
    """Every objective row on every model under DDP, ZeRO-2 and ZeRO-3; activations traced at ``sequences`` and at
    half of it, so that the largest batch that fits can be found (``largest_batch``)."""
    out = []
    for model in models:
        config = (configs or {}).get(model) or xlmr(model)
        for objective, row in ROWS.items():
            progress(f"{model} {objective}")
            traces = {
                bf16: (
                    trace_step(config, row, sequences, length, bf16),
                    trace_step(config, row, max(1, sequences // 2), length, bf16),
                )
                for bf16 in (False, True)
            }
            for engine in ENGINES:
                full, half = traces[engine != "ddp"]
                slope = (full.activation_bytes - half.activation_bytes) / max(1, sequences - max(1, sequences // 2))
                out.append(
                    Row(
                        model=model,
                        objective=objective,
                        engine=engine,
                        model_states=model_state_bytes(full.model_params, engine, gpus),
                        objective_states=model_state_bytes(full.objective_params, engine, gpus),
                        objective_state=full.state_bytes,
                        engine_buffers=engine_buffer_bytes(full, engine),
                        activations=full.activation_bytes,
                        per_sequence=slope,
                        sequences=sequences,
                    )
                )
    return out


def largest_batch(row: Row, capacity: float, headroom: float = HEADROOM) -> int:
    """The most sequences per GPU (a power of two up to 8, then a multiple of 8) whose estimate fits ``capacity``
    bytes less ``headroom``; 0 if not even one does."""
    room = capacity * (1 - headroom) - row.fixed()
    if row.per_sequence <= 0:
        return 0
    fits = math.floor(room / row.per_sequence)
    if fits >= 8:
        return fits // 8 * 8
    return 2 ** int(math.log2(fits)) if fits >= 1 else 0


CARDS = {"80 GB": 80e9, "141 GB": 141e9}
ENGINE_NAMES = {"ddp": "DDP bf16 autocast", "zero2": "ZeRO-2 bf16", "zero3": "ZeRO-3 bf16"}


def format_table(rows: list[Row], sequences: int, length: int, gpus: int) -> str:
    head = (
        f"Peak GPU memory per GPU, GB (1e9 bytes), at {sequences} x {length} tokens per GPU, N = {gpus} GPUs. "
        "model / objective states: formula (ZeRO accounting, per trainable parameter: DDP 4+4+8, "
        f"ZeRO-2 2+(2+12)/N, ZeRO-3 (2+2+12)/N); objective state: sized from the built objective; engine "
        "buffers: formula; activations: traced (one forward + backward, fake floating tensors).\n\n"
        "| model | objective | engine | model states | objective params+grads+opt | objective state | "
        "engine buffers | activations (traced) | total | largest batch 80 GB | largest batch 141 GB |\n"
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    lines = [
        f"| {r.model} | {r.objective} | {ENGINE_NAMES[r.engine]} | {r.model_states / GB:.2f} | "
        f"{r.objective_states / GB:.2f} | {r.objective_state / GB:.2f} | {r.engine_buffers / GB:.2f} | "
        f"{r.activations / GB:.2f} | {r.total / GB:.2f} | "
        + " | ".join(str(largest_batch(r, capacity)) for capacity in CARDS.values())
        + " |"
        for r in rows
    ]
    return (
        head
        + "\n".join(lines)
        + (
            f"\n\nLargest batch: sequences of {length} tokens per GPU that fit the card "
            f"with {HEADROOM:.0%} headroom (a power of two up to 8, then a multiple of 8), "
            "activations linear in the batch (traced at the batch and at half of it)."
        )
    )


def run_memory_bench(
    output_dir: Path, models: list[str], sequences: int, length: int, gpus: int, progress=print
) -> str:
    """Measure, print, and write ``<output_dir>/results.md``."""
    table = format_table(measure(models, sequences, length, gpus, progress=progress), sequences, length, gpus)
    print(table)
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "results.md").write_text(table + "\n")
    return table
