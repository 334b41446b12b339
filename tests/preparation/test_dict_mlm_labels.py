"""What reaches DICT-MLM in a run: the share of cross-lingual synonym labels grows with x as DICT-MLM-x says."""

from __future__ import annotations

import pytest

from conftest import QUICKSTART, SMALL
from distalign.config import load_config
from distalign.objectives.mlm import IGNORE_INDEX
from distalign.preparation.inputs import prepare_data
from distalign.preparation.streams import local_streams


def cross_lingual_label_share(percent: int) -> tuple[float, int]:
    config = load_config(QUICKSTART, SMALL + [
        "run.name=dict-labels", "objectives.mlm.weight=0", "objectives.dict_mlm.weight=1",
        f"objectives.dict_mlm.synonym_label_percent={percent}", "train.corpus_batch_size=32"])
    corpus = local_streams(prepare_data(config), config)["corpus"]
    cross = labelled = 0
    for _ in range(20):
        batch = next(corpus)
        has_label = batch["labels"] != IGNORE_INDEX
        labelled += int(has_label.sum())
        cross += int((has_label & (batch["label_lang_ids"] != batch["lang_ids"])).sum())
    return cross / labelled, cross


@pytest.fixture(scope="module")
def shares(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DISTALIGN_HOME", str(tmp_path_factory.mktemp("dict-labels")))
        yield {x: cross_lingual_label_share(x) for x in (0, 50, 90)}


def test_synonym_labels_follow_x(shares):
    assert shares[0][0] == 0.0  # DICT-MLM-0 is plain (dictionary-restricted) MLM
    (share50, n50), (share90, n90) = shares[50], shares[90]
    assert n90 > 300
    # the same seeds mask the same words: only the x% draw differs, so the shares scale with x
    assert abs(share90 / share50 - 90 / 50) < 0.2
    assert share50 < share90 <= 0.9
