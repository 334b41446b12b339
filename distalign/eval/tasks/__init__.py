"""Evaluation tasks, one plugin class a benchmark (``base``, ``registry``); ``distalign.eval.local_evaluation`` runs
them in this process.

A task says what to encode (``text_sets``) and how to score one layer (``score``).

Keeping the two apart lets one runner encode each distinct text set once (a 100K-word vocabulary
shared by several BLI pairs), cache it per checkpoint, and score task x pair x layer separately,
in-process (``distalign.eval.local_evaluation.evaluate_locally``) or as Ray tasks (``distalign.eval.distributed``).

Result rows are ``{task, pair, layer, metric, value}``; layer 0 is the embedding output, layer L
the last encoder layer.
"""

from __future__ import annotations

from distalign.eval.tasks.base import SENTENCES, WORDS, EvalTask, TextSet
from distalign.eval.tasks.bli import BLIRanking, BLITask
from distalign.eval.tasks.tatoeba import TatoebaTask
from distalign.eval.tasks.word_alignment import WordAlignmentTask
from distalign.eval.tasks.xlsim import XLSimTask

__all__ = [
    "BLIRanking",
    "BLITask",
    "EvalTask",
    "SENTENCES",
    "TatoebaTask",
    "TextSet",
    "WORDS",
    "WordAlignmentTask",
    "XLSimTask",
]
