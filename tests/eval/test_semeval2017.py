"""SemEval-2017 Task 2, subtask 2 (cross-lingual word similarity): its released file layout read into the XLSIM
task. The data are not in ../shared/data, so the files here are written in exactly the released format."""

import pytest
import torch
from test_eval_spec import spec_of

from distalign.errors import InputError
from distalign.eval.benchmarks import read_semeval2017, semeval2017_paths
from distalign.eval.suite import build_tasks
from distalign.eval.suite_spec import SuiteSpec

# de-en as released: word pairs (multi-word expressions allowed) and, line by line, their gold scores (0-4)
DATA = "Hund\tdog\nEiscreme\tice cream\nnur_ein_feld\nHaus\thouse\nBaum\t\nStein\tstone\nAuto\tcar\n"
GOLD = "4.00\n3.50\n1.0\n2.25\n0.5\nviel\n0.25\n\n"


def write_semeval(root, pair="de-en", data=DATA, gold=GOLD):
    folder = root / "semeval2017" / "subtask2-crosslingual"
    (folder / "data").mkdir(parents=True, exist_ok=True)
    (folder / "keys").mkdir(parents=True, exist_ok=True)
    (folder / "data" / f"{pair}.test.data.txt").write_text(data)
    (folder / "keys" / f"{pair}.test.gold.txt").write_text(gold)
    return root


def test_rows_scores_and_malformed_lines_with_file_and_line(tmp_path):
    data, gold, swapped = semeval2017_paths(write_semeval(tmp_path), "de", "en")
    assert (data.name, gold.name, swapped) == ("de-en.test.data.txt", "de-en.test.gold.txt", False)
    rows, report = read_semeval2017(data, gold)
    assert rows == [
        ("Hund", "dog", 4.0),
        ("Eiscreme", "ice cream", 3.5),
        ("Haus", "house", 2.25),
        ("Auto", "car", 0.25),
    ]
    assert (report.rows, report.malformed) == (4, 3)
    assert [e.split(": ")[0] for e in report.examples] == [f"{data}:3", f"{data}:5", f"{data}:6"]
    assert "expected word1<TAB>word2" in report.examples[0] and "empty word" in report.examples[1]
    assert f"score is not a number: 'viel' at {gold}:6" in report.examples[2]


def test_the_other_order_is_read_swapped_and_unaligned_files_are_an_error(tmp_path):
    write_semeval(tmp_path)
    rows, _ = read_semeval2017(*semeval2017_paths(tmp_path, "en", "de"))
    assert rows[0] == ("dog", "Hund", 4.0)
    write_semeval(tmp_path, "en-es", "dog\tperro\ncat\tgato\n", "4\n")
    with pytest.raises(
        InputError, match=r"not aligned: .*en-es.test.data.txt has 2 lines, .*en-es.test.gold.txt has 1"
    ):
        read_semeval2017(*semeval2017_paths(tmp_path, "en", "es"))
    with pytest.raises(InputError, match=r"file not found: .*data/en-fa.test.data.txt"):
        read_semeval2017(*semeval2017_paths(tmp_path, "en", "fa"))


def test_semeval_pairs_feed_the_xlsim_task_and_its_spearman(tmp_path):
    write_semeval(tmp_path, "de-en", "a\tx\nb\ty\nc\tz\n", "4\n0.5\n2\n")
    pairs = ("de-en", "deu-English")  # one task: its files' codes
    (task,) = build_tasks(SuiteSpec(eval_dir=str(tmp_path), tasks=("xlsim",), xlsim_pairs=(), semeval_pairs=pairs))
    assert (task.task, task.pair, task.rows) == (
        "xlsim_semeval",
        "de-en",
        [("a", "x", 4.0), ("b", "y", 0.5), ("c", "z", 2.0)],
    )
    # cosines 1, 0, -1 rank the pairs 3, 2, 1; the gold scores rank them 3, 1, 2:
    # rho = 1 - 6 * (0 + 1 + 1) / (3 * (9 - 1)) = 0.5
    src = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    tgt = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    assert task.score({"src": src, "tgt": tgt}) == {"spearman": pytest.approx(0.5)}


def test_the_eval_command_takes_semeval_pairs(tmp_path):
    spec = spec_of(
        "--model",
        "m",
        "--eval-dir",
        str(write_semeval(tmp_path)),
        "--tasks",
        "xlsim",
        "--xlsim-pairs",
        "",
        "--semeval-pairs",
        "de-en",
    )
    assert spec.suite.semeval_pairs == ("de-en",)
    (task,) = build_tasks(spec.suite)
    assert task.task == "xlsim_semeval" and len(task.rows) == 4 and spec.suite.reports[0].malformed == 3
