"""`distalign static bli`: BLI of .vec files, against a hand computation (cosine) and an independent numpy CSLS."""

import csv

import numpy as np
import pytest

from distalign.cli import main
from distalign.errors import InputError
from distalign.eval.static_vectors_bli import static_bli
from distalign.eval.suite_spec import SuiteSpec

DE = {"hund": [1, 0], "katze": [0, 1], "haus": [1, 1]}
EN = {"dog": [1, 0.1], "cat": [0.1, 1], "house": [1, 1.2], "car": [-1, 0]}
# haus -> car is wrong on purpose (its rank is 4); maus has no vector; one row has a single field
DICTIONARY = "hund\tdog\nkatze\tcat\nhaus\tcar\nmaus\tmouse\nbroken\n"


def write_vec(path, vectors: dict) -> str:
    path.write_text(f"{len(vectors)} 2\n" + "".join(f"{w} {a} {b}\n" for w, (a, b) in vectors.items()))
    return str(path)


@pytest.fixture
def files(tmp_path):
    (tmp_path / "de-en.tsv").write_text(DICTIONARY)
    return {
        "de": write_vec(tmp_path / "de.vec", DE),
        "en": write_vec(tmp_path / "en.vec", EN),
        "dictionary": str(tmp_path / "de-en.tsv"),
    }


def scores(rows, task="bli") -> dict:
    return {r["metric"]: r["value"] for r in rows if r["task"] == task}


def test_cosine_bli_of_static_vectors_matches_a_hand_computation(files):
    suite = SuiteSpec(bli_pairs=(), dictionaries=(("de", "en", files["dictionary"]),))
    rows = static_bli({"de": files["de"], "en": files["en"]}, suite)
    # hund -> dog: cos 0.995 beats house 0.640 (rank 1); katze -> cat: 0.995 beats house 0.768 (rank 1);
    # haus -> car: cos -0.707 is last of dog 0.774, cat 0.774, house 0.996 (rank 4)
    got = scores(rows)
    assert got["mrr"] == pytest.approx((1 + 1 + 1 / 4) / 3)
    assert (got["p_at_1"], got["p_at_5"], got["oov"], got["oov_source"]) == (pytest.approx(2 / 3), 1.0, 0, 1)
    assert {r["pair"] for r in rows} == {"de-en"}
    (report,) = [r for r in suite.reports if r.path.endswith("de-en.tsv")]
    assert report.malformed == 1 and "de-en.tsv:5" in report.examples[0]


def test_csls_bli_of_static_vectors_matches_numpy(files):
    suite = SuiteSpec(bli_pairs=(), dictionaries=(("de", "en", files["dictionary"]),), similarities=("csls",))
    got = scores(static_bli({"de": files["de"], "en": files["en"]}, suite), "bli_csls")
    src = np.array(list(DE.values()), float)
    tgt = np.array(list(EN.values()), float)
    src, tgt = src / np.linalg.norm(src, axis=1, keepdims=True), tgt / np.linalg.norm(tgt, axis=1, keepdims=True)
    cos = src @ tgt.T
    k = 10  # clipped to the row counts: every target, every source word
    r_t = np.sort(cos, axis=1)[:, ::-1][:, :k].mean(axis=1)
    r_s = np.sort(cos.T, axis=1)[:, ::-1][:, :k].mean(axis=1)
    csls = 2 * cos - r_t[:, None] - r_s[None, :]
    gold = [0, 1, 3]  # dog, cat, car
    ranks = [1 + int((csls[i] > csls[i, g]).sum()) for i, g in enumerate(gold)]
    assert got["mrr"] == pytest.approx(np.mean([1 / r for r in ranks]))
    assert got["p_at_1"] == pytest.approx(np.mean([r == 1 for r in ranks]))


def test_static_bli_command_prints_and_writes_the_rows(files, tmp_path, capsys):
    out = tmp_path / "results.csv"
    assert (
        main(
            [
                "static",
                "bli",
                "--vectors",
                f"de={files['de']}",
                "--vectors",
                f"en={files['en']}",
                "--dictionary",
                f"de-en:{files['dictionary']}",
                "--similarity",
                "cosine,csls",
                "--output",
                str(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "1 malformed rows skipped" in printed and "bli_csls" in printed
    rows = list(csv.DictReader(out.open()))
    mrr = {r["task"]: float(r["value"]) for r in rows if r["metric"] == "mrr"}
    assert set(mrr) == {"bli", "bli_csls"} and mrr["bli"] == pytest.approx(0.75)


def test_per_pair_ranking_and_vocabulary_size(files):
    """--vocab-size keeps the first words of each file: 'car' (4th) leaves the target space, so haus -> car is OOV."""
    suite = SuiteSpec(
        bli_pairs=(), dictionaries=(("de", "en", files["dictionary"]),), vocab_size=3, bli_ranking="per_pair"
    )
    got = scores(static_bli({"de": files["de"], "en": files["en"]}, suite))
    assert (got["mrr"], got["oov"], got["oov_source"]) == (1.0, 1, 1)


def test_missing_vectors_and_bad_flags_are_named(files, capsys):
    suite = SuiteSpec(bli_pairs=(), dictionaries=(("de", "en", files["dictionary"]),))
    with pytest.raises(InputError, match=r"--vectors: no vectors for 'en' \(pair de-en\)"):
        static_bli({"de": files["de"]}, suite)
    assert main(["static", "bli", "--vectors", files["de"], "--dictionary", f"de-en:{files['dictionary']}"]) == 2
    assert "expected LANG=PATH" in capsys.readouterr().err
    assert (
        main(
            [
                "static",
                "bli",
                "--vectors",
                f"de={files['de']}",
                "--vectors",
                f"en={files['en']}",
                "--dictionary",
                f"de-en:{files['dictionary']}",
                "--similarity",
                "dot",
            ]
        )
        == 2
    )
    assert "--similarity: ['dot'] not among" in capsys.readouterr().err


def test_gbli_pairs_from_the_eval_dir_are_read_as_distalign_eval_reads_them(files, tmp_path):
    """--bli-pairs de-en with only G-BLI's en-de file: read swapped, as ``distalign eval`` does."""
    folder = tmp_path / "eval" / "bli" / "gbli" / "en-de"
    folder.mkdir(parents=True)
    (folder / "yacle.test.freq.2k.en-de.tsv").write_text("dog\thund\ncat\tkatze\ncar\thaus\n")
    suite = SuiteSpec(eval_dir=str(tmp_path / "eval"), bli_pairs=("de-en",))
    assert scores(static_bli({"de": files["de"], "en": files["en"]}, suite))["mrr"] == pytest.approx(0.75)
