"""``distalign data fetch`` / ``data list`` from a local mirror of ../shared/data (127.0.0.1): the files land in the
data home byte for byte; a corrupt file is refused and not kept; an interrupted download resumes with a Range
request; offline mode names what is missing; a benchmark not fetched is an error naming the command that gets it."""

from __future__ import annotations

import hashlib

import pytest
from conftest import SHARED_DATA, free_port
from mirror_server import mirror_server

from distalign.benchmark_data.catalog import RESOURCES, all_files, select
from distalign.cli import main
from distalign.errors import InputError
from distalign.eval.suite import build_tasks
from distalign.eval.suite_spec import SuiteSpec

needs_shared_data = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="../shared/data (the mirror's files) is absent")


@pytest.fixture
def mirror():
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data (the mirror's files) is absent")
    with mirror_server(SHARED_DATA) as served:
        yield served


@pytest.fixture
def home(tmp_path, monkeypatch):
    """An empty data home, online."""
    monkeypatch.setenv("DISTALIGN_DATA", str(tmp_path / "data"))
    for name in ("DISTALIGN_OFFLINE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "DISTALIGN_DATA_MIRROR"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "data"


def fetch(*args: str) -> int:
    return main(["data", "fetch", *args])


@needs_shared_data
def test_pins_match_the_shared_copy():
    """Every catalogued file the shared copy holds has the pinned size and SHA-256 (PanLex-BLI is not there)."""
    held = [f for f in all_files() if (SHARED_DATA / f.path).is_file()]
    assert {f.resource for f in held} == set(RESOURCES) - {"panlex-bli"}
    assert len(held) == sum(1 for p in SHARED_DATA.rglob("*") if p.is_file() and p.name != "README.md")
    for file in held:
        data = (SHARED_DATA / file.path).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (file.size, file.sha256), file.path


def test_fetch_from_a_mirror_lays_out_the_files_as_the_shared_copy(mirror, home, capsys):
    assert fetch("g-bli:de-en,en-fi", "tatoeba", "multisimlex", "--mirror", mirror.url) == 0
    wanted = [*select("g-bli:en-de,en-fi")[1], *select("tatoeba")[1], *select("multisimlex")[1]]
    assert sorted(
        str(p.relative_to(home)) for p in home.rglob("*") if p.is_file() and ".locks" not in p.parts
    ) == sorted(f.path for f in wanted)  # de-en is G-BLI's en-de; nothing else written, no .part left
    for file in wanted:
        assert (home / file.path).read_bytes() == (SHARED_DATA / file.path).read_bytes()
    assert "tatoeba: 224 files (6.70MB) in" in capsys.readouterr().out
    served = len(mirror.requests)
    assert fetch("tatoeba", "--mirror", mirror.url) == 0 and len(mirror.requests) == served  # all there: no request
    assert "all there already" in capsys.readouterr().out
    assert main(["data", "list"]) == 0
    table = {line.split()[0]: line.split()[2] for line in capsys.readouterr().out.splitlines()[2:-2]}
    assert table == {
        "g-bli": "10/140",
        "panlex-bli": "no",
        "bli-vocab": "no",
        "multisimlex": "yes",
        "tatoeba": "yes",
        "omw": "no",
    }


def test_a_corrupt_file_is_an_error_naming_url_and_hashes_and_nothing_is_kept(mirror, home, capsys):
    [file] = [f for f in select("g-bli:en-de")[1] if "test" in f.path]
    mirror.corrupt.add(mirror.path_of(file.path))
    assert fetch("g-bli:en-de", "--mirror", mirror.url) == 2
    error = capsys.readouterr().err
    actual = bytearray((SHARED_DATA / file.path).read_bytes())
    actual[0] ^= 1
    assert mirror.url + mirror.path_of(file.path) in error and file.sha256 in error
    assert hashlib.sha256(actual).hexdigest() in error
    assert not (home / file.path).exists() and not (home / (file.path + ".part")).exists()


def test_an_interrupted_download_resumes_from_its_part_file_with_a_range_request(mirror, home, capsys):
    file = next(f for f in select("tatoeba:deu")[1] if f.path.endswith(".deu"))
    url_path = mirror.path_of(file.path)
    mirror.drop_after[url_path] = 10_000
    assert fetch("tatoeba:deu", "--mirror", mirror.url) == 2
    assert "run the same command again to resume" in capsys.readouterr().err
    part = home / (file.path + ".part")
    assert part.stat().st_size == 10_000 and not (home / file.path).exists()  # nothing half-written under its name
    assert fetch("tatoeba:deu", "--mirror", mirror.url) == 0
    assert (url_path, "bytes=10000-") in mirror.requests
    assert (home / file.path).read_bytes() == (SHARED_DATA / file.path).read_bytes() and not part.exists()


def test_an_unreachable_mirror_is_one_error_naming_the_url(home, capsys):
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    assert fetch("g-bli:en-de", "--mirror", url) == 2
    error = capsys.readouterr().err
    assert f"{url}/codogogo/xling-eval/" in error and "--mirror (DISTALIGN_DATA_MIRROR)" in error
    assert "Traceback" not in error


@pytest.mark.parametrize("switch", ["DISTALIGN_OFFLINE", "HF_HUB_OFFLINE"])
def test_offline_mode_names_what_is_missing_and_downloads_nothing(mirror, home, monkeypatch, capsys, switch):
    monkeypatch.setenv(switch, "1")
    monkeypatch.setenv("DISTALIGN_DATA_MIRROR", mirror.url)  # reachable, yet not asked
    assert fetch("g-bli:en-de", "multisimlex") == 2
    error = capsys.readouterr().err
    assert "offline" in error and "g-bli: 5 of 5 files" in error and "multisimlex: 66 of 66 files" in error
    assert "distalign data fetch g-bli:en-de multisimlex" in error
    assert mirror.requests == [] and not home.exists()


def test_names_and_parts_are_checked_before_anything_is_fetched(mirror, home, capsys):
    assert fetch("tatoeba", "gbli", "--mirror", mirror.url) == 2
    assert "no benchmark resource 'gbli'; choose from g-bli" in capsys.readouterr().err
    assert fetch("tatoeba", "g-bli:de-xx", "--mirror", mirror.url) == 2
    assert "g-bli: no part de-xx" in capsys.readouterr().err
    assert mirror.requests == []


@pytest.mark.parametrize(
    ("task", "key", "name"),
    [("bli", "bli_pairs", "g-bli"), ("xlsim", "xlsim_pairs", "multisimlex"), ("tatoeba", "tatoeba_langs", "tatoeba")],
)
def test_a_benchmark_not_in_the_data_home_names_its_fetch_command(home, task, key, name):
    with pytest.raises(InputError, match=f"`distalign data fetch {name}`"):
        build_tasks(SuiteSpec(tasks=(task,)))


@needs_shared_data
def test_the_synthetic_benchmark_takes_its_default_corpus_from_the_data_home(home, monkeypatch):
    from distalign.synthetic_languages.benchmark import BenchSpec, base_sentences, default_corpus_files

    with pytest.raises(InputError, match="`distalign data fetch tatoeba`"):
        base_sentences(BenchSpec())
    monkeypatch.setenv("DISTALIGN_DATA", str(SHARED_DATA))
    assert len(default_corpus_files()) == 112  # the English side of every Tatoeba pair


def test_eval_runs_on_fetched_benchmarks_with_no_eval_dir_given(ray_local, mirror, home, tmp_path):
    """The issue's "done when": `data fetch g-bli tatoeba multisimlex` into an empty data home, then `distalign eval`
    with no benchmark folder in the command reads them from there."""
    import pandas as pd

    from distalign.config import TinyModelConfig
    from distalign.models.loading import build_tiny_model

    tiny = TinyModelConfig(vocab_size=300, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)
    model = build_tiny_model(tmp_path / "model", ["der Hund the dog le chien", "die Katze the cat le chat"] * 50, tiny)
    assert fetch("g-bli", "tatoeba", "multisimlex", "--mirror", mirror.url) == 0
    out = tmp_path / "out"
    assert (
        main(
            [
                "eval",
                "--model",
                str(model),
                "--bli-pairs",
                "de-en",
                "--xlsim-pairs",
                "eng-fra",
                "--tatoeba-langs",
                "deu",
                "--max-queries",
                "50",
                "--max-sentences",
                "50",
                "--layer",
                "-1",
                "--no-mlflow",
                "--output-dir",
                str(out),
                "--cpus-per-task",
                "0.5",
            ]
        )
        == 0
    )
    results = pd.read_csv(out / "results.csv")
    assert {("bli", "de-en"), ("xlsim", "eng-fra"), ("tatoeba", "deu-eng")} <= set(zip(results.task, results.pair))
