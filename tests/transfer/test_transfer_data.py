"""Transfer data readers: Hub-schema save_to_disk folders, plain files, bad rows and missing data."""

import pytest
from datasets import ClassLabel, Dataset, DatasetDict, Features, Value
from transfer_data import FEATURES, rows, save_task

from distalign.errors import InputError
from distalign.transfer.data import read_split
from distalign.transfer.tasks.pair import PairExample, PAWSXTask, XNLITask
from distalign.transfer.tasks.tagging import UPOS, TaggedSentence, UDPOSTask, WikiANNTask


@pytest.mark.parametrize("task", [XNLITask, PAWSXTask, WikiANNTask, UDPOSTask])
def test_hub_schema_folders_read_every_split(tmp_path, task):
    save_task(tmp_path, task.name, "de", sizes=(5, 3, 4))
    sizes = [len(read_split(task, str(tmp_path), "de", split)[0]) for split in ("train", "validation", "test")]
    assert sizes == [5, 3, 4]
    examples, report = read_split(task, str(tmp_path), "de", "train")
    assert report.rows == 5 and report.malformed == 0
    source = rows(task.name, "de", 5, 0)
    if task.labels[0] == "O" or task is UDPOSTask:
        column = "ner_tags" if task is WikiANNTask else "upos"
        assert [list(e.words) for e in examples] == source["tokens"]
        assert [list(e.tags) for e in examples] == source[column]  # our label order is the Hub's
    else:
        assert [e.label for e in examples] == source["label"]


def test_labels_follow_the_data_sets_own_class_names(tmp_path):
    """A data set whose ClassLabel lists the names in another order is mapped by name, not by index."""
    features = Features(
        {
            "premise": Value("string"),
            "hypothesis": Value("string"),
            "label": ClassLabel(names=["contradiction", "entailment", "neutral"]),
        }
    )
    data = Dataset.from_dict(
        {"premise": ["a", "b", "c", "d"], "hypothesis": ["x", "y", "z", "w"], "label": [0, 1, 2, -1]}, features=features
    )
    DatasetDict({"train": data}).save_to_disk(str(tmp_path / "xnli" / "en"))
    examples, report = read_split(XNLITask, str(tmp_path), "en", "train")
    assert [e.label for e in examples] == [2, 0, 1]  # contradiction, entailment, neutral in the Hub's order
    assert report.malformed == 1 and report.examples == [
        f"{tmp_path / 'xnli' / 'en'}[train]:3: label -1 is not one of ['contradiction', 'entailment', 'neutral']"
    ]


def test_bad_hub_rows_are_counted_with_their_index(tmp_path):
    data = rows("wikiann", "en", 4, 0)
    data["ner_tags"][1] = data["ner_tags"][1][:-1]  # one tag short
    data["tokens"][3][0] = " "
    DatasetDict({"train": Dataset.from_dict(data, features=FEATURES["wikiann"])}).save_to_disk(
        str(tmp_path / "wikiann" / "en")
    )
    examples, report = read_split(WikiANNTask, str(tmp_path), "en", "train")
    assert len(examples) == 2 and report.malformed == 2
    n = len(data["tokens"][1])
    assert report.examples[0].endswith(f"[train]:1: {n} words but {n - 1} tags")
    assert ":3: an empty word" in report.examples[1]


def test_xnli_tsv_with_header_language_column_and_bad_rows(tmp_path):
    folder = tmp_path / "xnli" / "de"
    folder.mkdir(parents=True)
    (folder / "dev.tsv").write_text(
        "language\tgold_label\tsentence1\tsentence2\n"
        "de\tentailment\tEin Hund .\tEin Tier .\n"
        "fr\tneutral\tUn chien .\tUn animal .\n"  # another language's row: not ours, not bad
        "de\tmaybe\tEin Hund .\tEine Katze .\n"  # line 4: unknown label
        "de\tcontradictory\tEin Hund .\tKein Hund .\n"  # XNLI-MT's spelling
        "de\tneutral\n"
    )  # line 6: short row
    examples, report = read_split(XNLITask, str(tmp_path), "de", "validation")
    assert examples == [PairExample("Ein Hund .", "Ein Tier .", 0), PairExample("Ein Hund .", "Kein Hund .", 2)]
    assert report.malformed == 2
    assert report.examples[0].startswith(f"{folder / 'dev.tsv'}:4: label 'maybe'")
    assert report.examples[1].startswith(f"{folder / 'dev.tsv'}:6: ")


def test_pawsx_tsv(tmp_path):
    folder = tmp_path / "pawsx" / "en"
    folder.mkdir(parents=True)
    (folder / "train.tsv").write_text("id\tsentence1\tsentence2\tlabel\n1\tA b .\tB a .\t1\n2\tC .\tD .\t0\n")
    examples, _ = read_split(PAWSXTask, str(tmp_path), "en", "train")
    assert examples == [PairExample("A b .", "B a .", 1), PairExample("C .", "D .", 0)]


def test_conll_ner_file(tmp_path):
    folder = tmp_path / "wikiann" / "de"
    folder.mkdir(parents=True)
    (folder / "test.conll").write_text(
        "-DOCSTART-\tO\n\n"
        "de:Anna\tB-PER\nde:sieht\tO\nde:Berlin\tB-LOC\n\n"
        "Peter\tB-PER\nlacht\tB-VERB\n\n"  # line 8: not a WikiANN tag: the sentence is skipped
        "Rom\n\n"  # line 10: no tag
        "Maria B-PER\n"
    )  # space-separated, no blank line at the end
    examples, report = read_split(WikiANNTask, str(tmp_path), "de", "test")
    assert examples == [TaggedSentence(("Anna", "sieht", "Berlin"), (1, 0, 5)), TaggedSentence(("Maria",), (1,))]
    assert report.malformed == 2
    assert report.examples[0].startswith(f"{folder / 'test.conll'}:8: expected 'word<TAB>tag'")
    assert report.examples[1].startswith(f"{folder / 'test.conll'}:10: ")


def test_conllu_file_keeps_syntactic_words(tmp_path):
    folder = tmp_path / "udpos" / "fr"
    folder.mkdir(parents=True)
    line = "{}\t{}\t_\t{}\t_\t_\t0\troot\t_\t_\n"
    (folder / "train.conllu").write_text(
        "# text = Il va au marché\n"
        + line.format(1, "Il", "PRON")
        + line.format(2, "va", "VERB")
        + "3-4\tau\t_\t_\t_\t_\t_\t_\t_\t_\n"
        + line.format(3, "à", "ADP")
        + line.format(4, "le", "DET")
        + line.format(5, "marché", "NOUN")
        + "\n"
        + line.format(1, "Oui", "YES")
        + "\n"
    )  # line 9: not a UPOS tag
    examples, report = read_split(UDPOSTask, str(tmp_path), "fr", "train")
    assert examples == [
        TaggedSentence(
            ("Il", "va", "à", "le", "marché"), tuple(UPOS.index(t) for t in ("PRON", "VERB", "ADP", "DET", "NOUN"))
        )
    ]
    assert report.malformed == 1 and report.examples[0].startswith(f"{folder / 'train.conllu'}:9: ")


def test_a_missing_split_or_language_is_an_error_naming_it(tmp_path):
    save_task(tmp_path, "xnli", "en")
    DatasetDict({"train": Dataset.from_dict(rows("xnli", "de", 2, 0), features=FEATURES["xnli"])}).save_to_disk(
        str(tmp_path / "xnli" / "de")
    )
    with pytest.raises(InputError, match=r"has no 'test' split for language de \(splits: \['train'\]\)"):
        read_split(XNLITask, str(tmp_path), "de", "test")
    with pytest.raises(InputError, match=r"xnli: no test data for language sw: looked for .*xnli/sw/dataset_dict.json"):
        read_split(XNLITask, str(tmp_path), "sw", "test")


def test_udpos_hub_config_is_a_treebank():
    assert UDPOSTask.hub_config("en", {}) == "en_ewt"
    assert UDPOSTask.hub_config("de", {"udpos:de": "de_hdt"}) == "de_hdt"
    assert XNLITask.hub_config("sw", {}) == "sw"
    with pytest.raises(InputError, match="udpos:yo="):
        UDPOSTask.hub_config("yo", {})


def test_the_hub_path_asks_for_the_tasks_data_set_config_and_split(tmp_path, monkeypatch):
    """What --hub hands datasets.load_dataset (stood in for here: nothing can be downloaded)."""
    import datasets

    asked = []

    def load_dataset(name, config, split):
        asked.append((name, config, split))
        task = {"universal_dependencies": "udpos", "xnli": "xnli"}[name]
        return Dataset.from_dict(rows(task, "de", 3, 0), features=FEATURES[task])

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    examples, report = read_split(UDPOSTask, str(tmp_path), "de", "test", hub=True, hub_configs={"udpos:de": "de_hdt"})
    assert asked == [("universal_dependencies", "de_hdt", "test")] and len(examples) == 3
    assert report.path == "universal_dependencies/de_hdt[test]"
    read_split(XNLITask, "", "sw", "validation", hub=True)
    assert asked[-1] == ("xnli", "sw", "validation")
