"""What an objective plugin is: one class that owns everything about one training objective.

A plugin subclasses ``Objective`` and sets, beside its ``forward``:

- ``Config``: a dataclass whose fields are the keys of its YAML section ``objectives.<name>``
  (``weight`` included; a weight of 0 switches the objective off). The loader and the error
  messages are built from it: nothing restates the schema.
- ``stream`` and ``consumes``: the stream it reads (``distalign.data.stream_plugins.STREAMS``) and the
  tensors of that stream's batches it uses; ``prepares``: the tensors its data-side preparer adds.
- ``stream_settings``: how its stream must be tokenised (typed settings it refines).
- ``batch_preparer``: the random per-batch transformation of its stream (masking), run on CPU in
  Ray Data with per-row seeds, so the worker only moves finished tensors to its device.
- ``validate``: checks of its section that need more than types; errors name the dotted key. It, like
  ``stream_settings``, sees its own section and the run's ``RunFacts``, never the whole experiment config.
- ``uses_lm_head`` / ``uses_word_pairs``: whether its loss trains the masked LM head (DDP must be
  told about parameters without gradients) and whether it reads the run's training word pairs.
- ``build``: the module from its config and the worker's ``ObjectiveContext``; ``after_step``:
  state moved forward once per optimizer step on every rank. Parameters, buffers and
  ``get_extra_state`` are checkpointed with the run (``objectives.pt``).
- ``reference``: the paper; the module docstring gives the formula.
- ``exported_input_table``: the state-dict key of a language table the model keeps adding to its input
  after pre-training (DICT-MLM §3.1), exported beside the model in each checkpoint; None for the others.

``distalign.objectives.registry`` maps each section name to its plugin.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np
import torch
from torch import nn

from distalign.data.batches import TensorSpec
from distalign.data.row_random import RowRandom
from distalign.data.run_facts import RunFacts

if TYPE_CHECKING:
    import pyarrow as pa

# Parameters -> a context giving their whole values, in the precision the optimizer steps, to change in place
# outside a step; on leaving it the changes reach the weights the next forward reads. The training engine's
# (``distalign.train.engine``): DeepSpeed keeps fp32 master copies and, under ZeRO-3, a partition in the module.
EditParameters = Callable[[list[nn.Parameter]], contextlib.AbstractContextManager[list[torch.Tensor]]]


@contextlib.contextmanager
def edit_in_place(parameters: list[nn.Parameter]) -> Iterator[list[torch.Tensor]]:
    """``EditParameters`` of a module that holds its whole weights in the optimizer's precision (DDP, one
    process): the parameters' own data."""
    with torch.no_grad():
        yield [p.data for p in parameters]


@dataclass
class DataContext:
    """What a data-side preparer is built from; picklable, it travels to the Ray Data tasks."""

    tokenizer_path: str
    languages: list[str]  # a language's id is its index here
    word_pairs: pa.Table | None  # the run's training word pairs (word1, lang1, word2, lang2) if an objective uses them
    max_seq_length: int


@dataclass
class ObjectiveContext:
    """What a worker builds objectives from."""

    masked_lm: nn.Module
    tokenizer: Any
    languages: list[str]
    word_pairs: pa.Table | None = None  # as in DataContext
    seed: int = 0


class BatchPreparer(Protocol):
    """A picklable data-side transformation: the stream's numpy batch -> the tensors ``Objective.prepares``."""

    def __call__(self, batch: dict[str, np.ndarray], random: RowRandom) -> dict[str, np.ndarray]: ...


class Objective(nn.Module):
    Config: ClassVar[type]
    stream: ClassVar[str]
    consumes: ClassVar[tuple[str, ...]]
    prepares: ClassVar[tuple[TensorSpec, ...]] = ()
    uses_lm_head: ClassVar[bool] = False
    uses_word_pairs: ClassVar[bool] = False
    reference: ClassVar[str] = ""
    exported_input_table: ClassVar[str | None] = None

    @classmethod
    def validate(cls, cfg, facts: RunFacts, key: str) -> None:
        """Raise ``ConfigError`` naming ``<key>.<field>`` for values the types alone do not rule out."""

    @classmethod
    def stream_settings(cls, cfg, facts: RunFacts, settings: Any) -> Any:
        """Its stream's tokenisation ``settings`` (an instance of the stream's ``Settings`` dataclass,
        ``distalign.data.stream_plugins``) as this objective needs them (e.g. words with glosses:
        ``dataclasses.replace(settings, with_gloss=True)``)."""
        return settings

    @classmethod
    def batch_preparer(cls, cfg, ctx: DataContext) -> BatchPreparer | None:
        """The data-side transformation of this objective's stream, or None."""
        return None

    @classmethod
    def build(cls, cfg, ctx: ObjectiveContext) -> Objective:
        return cls()

    def forward(self, model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError

    # how to change parameters outside a step (``EditParameters``): the training recipe sets its engine's
    edit_parameters: EditParameters = staticmethod(edit_in_place)

    def after_step(self) -> None:
        """Move state kept outside the optimizer forward; called on every rank after each step (parameters changed
        here go through ``self.edit_parameters``)."""
