"""``docs/reference/metrics.md``: the MLflow metric names, from their registry ``distalign.metric_names``."""

from __future__ import annotations

from distalign.metric_names import METRICS
from distalign.tools.reference import markdown as md

INTRO = """\
# MLflow metrics

{generated}

The metrics each kind of run logs to MLflow. A `<placeholder>` stands for one part of the name: an
objective (`mlm`, `lexical`, ...; the sections of `objectives`), a language pair (`xa-xb`), a language,
a task. Parameters are the config's keys, flattened with dots (`train.lr`); see [configuration keys](config.md).
"""


def render() -> str:
    parts = [INTRO.format(generated=md.GENERATED.format(source="distalign/metric_names.py"))]
    for kind in METRICS:
        parts += [
            f"## {kind.title}",
            md.text(kind.about),
            md.table(("Metric", "Meaning"), [(f"`{f.pattern}`", md.text(f.meaning)) for f in kind.families]),
        ]
    return "\n\n".join(parts) + "\n"
