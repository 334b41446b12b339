"""Builds the objective modules a config asks for (those with weight > 0)."""

from __future__ import annotations

from torch import nn

from distalign.config import ObjectivesConfig
from distalign.objectives.align_mlm import AlignObjective
from distalign.objectives.lexical import LexicalObjective
from distalign.objectives.sense_lexical import SenseLexicalObjective
from distalign.objectives.mlm import MLMObjective


def build_objectives(cfg: ObjectivesConfig) -> tuple[dict[str, nn.Module], dict[str, float]]:
    factories = {
        "mlm": lambda: MLMObjective(),
        "lexical": lambda: (SenseLexicalObjective(cfg.lexical.temperature, cfg.lexical.gloss_weight)
                            if cfg.lexical.sense_level else LexicalObjective(cfg.lexical.temperature)),
        "align": lambda: AlignObjective(),
    }
    weights = cfg.active()
    return {name: factories[name]() for name in weights}, weights
