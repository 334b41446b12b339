"""The per-step masking of corpus batches: BERT whole-word MLM, or DICT-MLM's dictionary-aware variant."""

from __future__ import annotations

from typing import Callable

import pyarrow as pa
import torch

from distalign.config import ObjectivesConfig
from distalign.objectives.dict_mlm import DictMLMMasking, build_synonym_table, mask_dict_mlm_batch
from distalign.objectives.mlm import whole_word_mask

CorpusMasker = Callable[[dict[str, torch.Tensor], torch.Generator], dict[str, torch.Tensor]]


def build_corpus_masker(cfg: ObjectivesConfig, tokenizer, max_length: int, dictionary: pa.Table | None,
                        languages: list[str]) -> tuple[CorpusMasker, str]:
    """(masker, a line describing it). DICT-MLM needs the run's dictionary pairs and languages."""
    if cfg.dict_mlm.weight > 0:
        c = cfg.dict_mlm
        table = build_synonym_table(dictionary, tokenizer, languages)
        masking = DictMLMMasking(tokenizer.mask_token_id, len(tokenizer), tokenizer.cls_token_id,
                                 tokenizer.sep_token_id, tokenizer.pad_token_id, c.mask_prob, c.keep_original,
                                 c.tlm, c.switch_prob, max_length)
        description = (f"DICT-MLM: {len(table.entries)} dictionary entries over {len(languages)} languages, "
                       f"dropped {dict(table.dropped)}")
        return (lambda corpus, generator: mask_dict_mlm_batch(corpus, table, masking, generator)), description

    def mask(corpus: dict[str, torch.Tensor], generator: torch.Generator) -> dict[str, torch.Tensor]:
        corpus["masked_ids"], corpus["labels"] = whole_word_mask(
            corpus["input_ids"], corpus["word_ids"], tokenizer.mask_token_id, len(tokenizer), cfg.mlm.mask_prob,
            generator)
        return corpus

    return mask, f"MLM: whole-word masking of {cfg.mlm.mask_prob:.0%} of the words"
