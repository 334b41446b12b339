"""One entry to the two ways of mapping a static space onto another, and their word2vec-file form.

``procrustes`` (``distalign.static.procrustes``): an orthogonal map of the source onto the
normalised target, the target left where it is. ``vecmap`` (``distalign.static.vecmap``): the
static-contextual paper's choice, VecMap's whitening, orthogonal map, re-weighting and
de-whitening, which moves both spaces into a shared one of their own.

``iterations`` is the number of self-learning rounds for both (0 = the seed dictionary only; for
VecMap > 0 means semi-supervised, at most that many rounds, fewer when it converges).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import get_args

import numpy as np

from distalign.data.readers import read_dictionary
from distalign.errors import ConfigError, InputError
from distalign.objectives.static_mapping import StaticMapping as MappingMethod
from distalign.static.procrustes import align_spaces, apply_map, preprocess
from distalign.static.vecmap import VecMapSettings, apply_vecmap, vecmap_align
from distalign.static.word2vec_format import read_word2vec, write_word2vec

MAPPING_METHODS: tuple[str, ...] = get_args(MappingMethod)


def map_spaces(
    method: MappingMethod,
    src_words: Sequence[str],
    src_vecs: np.ndarray,
    tgt_words: Sequence[str],
    tgt_vecs: np.ndarray,
    seed_pairs: Sequence[tuple[str, str]],
    iterations: int = 0,
    keep_target: bool = False,
) -> tuple[np.ndarray, np.ndarray, dict]:
    """Source and target vectors in one space, and the fit's report (``dictionary_sizes``, ``seed_missing``, ...).

    ``keep_target``: the target stays in its normalised space and only the source moves (a pivot
    shared by several sources). Procrustes always does this; VecMap then maps the source by
    ``W_x W_z^{-1}``, which keeps its dictionary fit but gives up the target's own re-weighting.
    """
    if method == "procrustes":
        w, report = align_spaces(src_words, src_vecs, tgt_words, tgt_vecs, seed_pairs, iterations=iterations)
        return apply_map(src_vecs, w), preprocess(tgt_vecs, normalize=True), report
    if method == "vecmap":
        settings = VecMapSettings(self_learning=iterations > 0, max_iterations=max(iterations, 1))
        wx, wz, report = vecmap_align(src_words, src_vecs, tgt_words, tgt_vecs, seed_pairs, settings)
        if keep_target:
            return apply_vecmap(src_vecs, wx @ np.linalg.inv(wz)), preprocess(tgt_vecs, normalize=True), report
        return apply_vecmap(src_vecs, wx), apply_vecmap(tgt_vecs, wz), report
    raise ValueError(f"unknown mapping method {method!r}; expected one of {list(MAPPING_METHODS)}")


def align_files(
    src_vec_path: str | Path,
    tgt_vec_path: str | Path,
    dictionary_path: str | Path,
    out_path: str | Path,
    iterations: int = 0,
    tgt_out_path: str | Path | None = None,
    method: MappingMethod = "procrustes",
) -> dict:
    """Align word2vec text files with a ``src<TAB>tgt`` seed dictionary; write the mapped source vectors.

    The mapped source lives in the *mapped* target space (normalised for Procrustes, VecMap's own
    for ``vecmap``): ``tgt_out_path`` writes it (compare against it, not the raw target file);
    VecMap requires it. Returns :func:`map_spaces`'s report plus the reading summaries (``read``).
    """
    if method == "vecmap" and tgt_out_path is None:
        raise ConfigError("method 'vecmap' moves the target space too: give an output for it (--tgt-out)")
    src_words, src_vecs, src_report = read_word2vec(src_vec_path)
    tgt_words, tgt_vecs, tgt_report = read_word2vec(tgt_vec_path)
    pairs, dict_report = read_dictionary(dictionary_path)  # no languages declared
    seed_pairs = list(zip(pairs["word1"].to_pylist(), pairs["word2"].to_pylist()))
    src_vocab, tgt_vocab = set(src_words), set(tgt_words)
    if not any(src in src_vocab and tgt in tgt_vocab for src, tgt in seed_pairs):
        raise InputError(
            f"{dictionary_path}: none of its {len(seed_pairs)} pairs has a vector on both sides "
            f"({src_vec_path}, {tgt_vec_path}): give a seed dictionary of these two languages, the "
            "source word first"
        )
    mapped_src, mapped_tgt, report = map_spaces(
        method, src_words, src_vecs, tgt_words, tgt_vecs, seed_pairs, iterations
    )
    write_word2vec(out_path, src_words, mapped_src)
    if tgt_out_path is not None:
        write_word2vec(tgt_out_path, tgt_words, mapped_tgt)
    report["read"] = [r.summary() for r in (src_report, tgt_report, dict_report)]
    return report
