"""The objective plugins by YAML section name: ``objectives.<name>`` configures ``OBJECTIVES[name]``.

Adding an objective = one module with an ``Objective`` subclass (``distalign.objectives.base``)
and one line here (see docs/explanations/architecture.md, "Adding an objective").
"""

from __future__ import annotations

from distalign.objectives.align_mlm import AlignObjective
from distalign.objectives.base import Objective
from distalign.objectives.dict_mlm import DictMLMObjective
from distalign.objectives.lexical import LexicalObjective
from distalign.objectives.mlm import MLMObjective
from distalign.objectives.sense_aware import SenseAwareObjective
from distalign.objectives.static_align import StaticAlignObjective
from distalign.objectives.tlm import TLMObjective

OBJECTIVES: dict[str, type[Objective]] = {
    "mlm": MLMObjective,
    "lexical": LexicalObjective,
    "align": AlignObjective,
    "dict_mlm": DictMLMObjective,
    "static": StaticAlignObjective,
    "sense_aware": SenseAwareObjective,
    "tlm": TLMObjective,
}
