"""Builds the objective modules a config asks for (those with weight > 0)."""

from __future__ import annotations

from torch import nn

from distalign.config import ObjectivesConfig
from distalign.objectives.align_mlm import AlignObjective
from distalign.objectives.dict_mlm import DictMLMObjective
from distalign.objectives.lexical import LexicalObjective
from distalign.objectives.sense_lexical import SenseLexicalObjective
from distalign.objectives.static_align import StaticAlignObjective
from distalign.objectives.mlm import MLMObjective


def build_objectives(cfg: ObjectivesConfig, masked_lm: nn.Module,
                     num_languages: int) -> tuple[dict[str, nn.Module], dict[str, float]]:
    """Objectives sized for ``masked_lm``; ``num_languages`` sizes DICT-MLM's language embeddings."""
    factories = {
        "mlm": lambda: MLMObjective(),
        "lexical": lambda: (SenseLexicalObjective(cfg.lexical.temperature, cfg.lexical.gloss_weight)
                            if cfg.lexical.sense_level else LexicalObjective(cfg.lexical.temperature)),
        "align": lambda: AlignObjective(),
        "dict_mlm": lambda: DictMLMObjective.for_model(masked_lm, num_languages),
        "static": lambda: StaticAlignObjective(cfg.static.loss, cfg.static.dcca_k),
    }
    weights = cfg.active()
    return {name: factories[name]() for name in weights}, weights
