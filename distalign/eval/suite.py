"""Which benchmarks to run, read from the files of an evaluation directory into tasks (before any Ray work).

Layout of ``eval_dir`` (default the data home's ``eval/``; see ``distalign.eval.benchmarks``): G-BLI test
dictionaries, 100K-word target vocabularies, Multi-SimLex CSVs, Tatoeba test sets. Every file is
read and checked here, so a missing file or a bad pair name fails before the cluster is used.
"""

from __future__ import annotations

from pathlib import Path

from distalign import benchmark_data
from distalign.errors import InputError
from distalign.eval.suite_spec import SuiteSpec
from distalign.eval.tasks.base import EvalTask
from distalign.eval.tasks.registry import EVAL_TASKS


def build_tasks(spec: SuiteSpec) -> list[EvalTask]:
    """The evaluation tasks of a suite, every benchmark file read and checked (before any Ray work).

    The tasks of each plugin named in ``spec.tasks`` (its ``from_suite``), in the registry's order;
    what each reader kept and skipped is appended to ``spec.reports``. Errors name the spec key and
    its ``distalign eval`` flag.
    """
    unknown = [name for name in spec.tasks if name not in EVAL_TASKS]
    if unknown:
        raise InputError(f"suite.tasks (--tasks): unknown task(s) {unknown}; choose from {', '.join(EVAL_TASKS)}")
    if not spec.eval_dir:  # the data home's, filled by `distalign data fetch`: each benchmark names its command
        spec.eval_dir = str(benchmark_data.eval_dir())
    elif not Path(spec.eval_dir).is_dir():
        raise InputError(f"suite.eval_dir (--eval-dir): directory not found: {spec.eval_dir}")
    return [task for name, plugin in EVAL_TASKS.items() if name in spec.tasks for task in plugin.from_suite(spec)]
