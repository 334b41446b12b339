"""What reaches the lexical objective: constraint batches drawn by language pair with q ∝ p^α, on the full set."""

from __future__ import annotations

import collections

import pyarrow as pa
import pyarrow.parquet as pq
from conftest import QUICKSTART

from distalign.config import load_config
from distalign.data.constraint_schema import CONSTRAINT_SCHEMA
from distalign.preparation.inputs import prepare_data
from distalign.preparation.ray_streams import local_streams


def skewed_constraints(path, n_de=900, n_sw=100):
    rows = [(f"house{i}", "en", f"haus{i}", "de", f"de{i}") for i in range(n_de)] + [
        (f"tree{i}", "en", f"mti{i}", "sw", f"sw{i}") for i in range(n_sw)
    ]
    word1, lang1, word2, lang2, synset = zip(*rows)
    pq.write_table(
        pa.table(
            {
                "word1": word1,
                "lang1": lang1,
                "word2": word2,
                "lang2": lang2,
                "synset_id": synset,
                "gloss1": [None] * len(rows),
                "gloss2": [None] * len(rows),
            },
            schema=CONSTRAINT_SCHEMA,
        ),
        path,
    )


def test_batches_follow_q_on_the_full_constraint_set(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path))
    skewed_constraints(tmp_path / "c.parquet")
    config = load_config(
        QUICKSTART,
        [
            "run.name=sampling",
            "data.source=files",
            f"data.constraints=[{tmp_path / 'c.parquet'}]",
            "data.max_constraints=0",
            "data.sampling_alpha=0.5",
            "objectives.mlm.weight=0",
            "train.num_workers=1",
            "train.constraint_batch_size=16",
            "train.max_steps=200",
            "model.tiny.vocab_size=300",
        ],
    )
    prepared = prepare_data(config)
    pair_of = dict(zip(prepared.constraints["synset_index"].to_pylist(), prepared.constraints["lang2"].to_pylist()))
    batches = local_streams(prepared, config)["constraints"]
    counts = collections.Counter(pair_of[s] for _ in range(200) for s in next(batches)["synset"].tolist())
    share_sw = counts["sw"] / sum(counts.values())
    # p = 0.9 / 0.1 -> q = 0.75 / 0.25 with α = 0.5 (the raw table would give 0.1); sd ~0.008 over 3,200 draws
    assert abs(share_sw - 0.25) < 0.03


def test_a_language_sample_run_trains_on_its_pairs_only_and_evaluates_on_the_test_languages(tmp_path, monkeypatch):
    """The settings a language-sample trial gets (BabelBERT §5.1): constraints of the sample's languages,
    exactly N per pair; BLI on the test languages' pairs."""
    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path))
    config = load_config(
        QUICKSTART,
        [
            "run.name=sample",
            "data.synthetic.languages=[en,de,fr,sw]",
            "data.synthetic.num_concepts=200",
            "data.constraint_languages=[en,de]",
            "data.constraints_per_pair=8",
            "eval.languages=[fr,sw]",
            "train.num_workers=1",
            "train.constraint_batch_size=8",
        ],
    )
    prepared = prepare_data(config)
    pairs = collections.Counter(
        "-".join(sorted(p))
        for p in zip(prepared.constraints["lang1"].to_pylist(), prepared.constraints["lang2"].to_pylist())
    )
    assert dict(pairs) == {"de-en": 8, "en-en": 8, "de-de": 8}
    assert [(p.lang1, p.lang2) for p in prepared.eval_pairs] == [("fr", "sw")]
