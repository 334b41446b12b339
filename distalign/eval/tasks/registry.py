"""The evaluation task plugins by name: ``suite.tasks: [<name>, ...]`` runs ``EVAL_TASKS[name]``.

Adding a task = one module with an ``EvalTask`` subclass (``distalign.eval.tasks.base``) and one
line here (see docs/explanations/architecture.md, "Adding an evaluation task"). The order here is the order of the tasks
in a run and in its tables.
"""

from __future__ import annotations

from distalign.eval.tasks.base import EvalTask
from distalign.eval.tasks.bli import BLITask
from distalign.eval.tasks.tatoeba import TatoebaTask
from distalign.eval.tasks.word_alignment import WordAlignmentTask
from distalign.eval.tasks.xlsim import XLSimTask

EVAL_TASKS: dict[str, type[EvalTask]] = {
    "bli": BLITask,
    "word_alignment": WordAlignmentTask,
    "xlsim": XLSimTask,
    "tatoeba": TatoebaTask,
}
