"""Builds the objective modules a config asks for (those with weight > 0)."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from torch import nn

from distalign.config import ObjectivesConfig
from distalign.objectives.align_mlm import AlignObjective
from distalign.objectives.dict_mlm import DictMLMObjective
from distalign.objectives.lexical import LexicalObjective
from distalign.objectives.mlm import MLMObjective
from distalign.objectives.sense_aware import SenseAwareObjective, translation_table_from_dictionary
from distalign.objectives.sense_lexical import SenseLexicalObjective
from distalign.objectives.static_align import StaticAlignObjective


@dataclass
class ObjectiveContext:
    """What some objectives are sized or seeded from."""

    masked_lm: nn.Module
    tokenizer: object
    languages: list[str]  # DICT-MLM's language embeddings
    dictionary: pa.Table | None = None  # training pairs: sense-aware translations
    seed: int = 0


def build_objectives(cfg: ObjectivesConfig, ctx: ObjectiveContext) -> tuple[dict[str, nn.Module], dict[str, float]]:
    sa = cfg.sense_aware
    factories = {
        "mlm": lambda: MLMObjective(),
        "lexical": lambda: (SenseLexicalObjective(cfg.lexical.temperature, cfg.lexical.gloss_weight)
                            if cfg.lexical.sense_level else LexicalObjective(cfg.lexical.temperature)),
        "align": lambda: AlignObjective(),
        "dict_mlm": lambda: DictMLMObjective.for_model(ctx.masked_lm, len(ctx.languages)),
        "static": lambda: StaticAlignObjective(cfg.static.loss, cfg.static.dcca_k),
        "sense_aware": lambda: SenseAwareObjective(
            ctx.masked_lm, translation_table_from_dictionary(ctx.dictionary, ctx.tokenizer, sa.max_translations),
            sa.num_senses, sa.proj_dim, sa.queue_size, sa.refit_every, sa.alpha, sa.warmup_steps, sa.prune_beta,
            sa.prune_min_count, sa.translation_weight, ctx.seed),
    }
    weights = cfg.active()
    return {name: factories[name]() for name in weights}, weights
