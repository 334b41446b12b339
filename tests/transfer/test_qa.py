"""Extractive QA: the SQuAD / MLQA metrics by hand, the readers on each Hub schema and on SQuAD JSON, what reaches the
loss, the span chosen over several windows, and a tiny fine-tune scored per language (no Ray)."""

import numpy as np
import pytest
import torch
from qa_data import FEATURES, answer_of, rows, save_qa, squad_json
from tiny_tokenizers import wordpiece_tokenizer
from transfer_data import LEXICON, tiny_model

from distalign.errors import InputError
from distalign.models.loading import load_tokenizer
from distalign.transfer import finetune
from distalign.transfer.data import read_split
from distalign.transfer.finetune import FineTuneJob, TaskData, compact, fine_tune
from distalign.transfer.metrics import qa_scores
from distalign.transfer.tasks.base import FineTuneSettings
from distalign.transfer.tasks.qa import MAX_ANSWER_TOKENS, MLQATask, QAExample, QATask, TyDiQATask, XQuADTask

MAX_LENGTH, STRIDE = 24, 4  # windows of 24 tokens, 4 context tokens apart: most contexts take several


def test_squad_scores_by_hand():
    gold = [
        ["Eiffel tower"],
        ["Paris"],
        ["Broncos", "Denver Broncos", "the Broncos team"],
        ["red car", "old car parked"],
        ["Rome"],
    ]
    predicted = ["the Eiffel Tower!", "in Paris, France", "Denver Broncos", "an old red car", "Berlin"]
    # 1: articles, case and punctuation go: exact. 2: [in paris france] vs [paris]: P 1/3, R 1, F1 0.5.
    # 3: equals the second gold answer. 4: [old red car] vs [red car]: P 2/3, R 1, F1 0.8; vs [old car parked]:
    # P 2/3, R 2/3, F1 2/3; the max is 0.8. 5: nothing shared.
    assert qa_scores(gold, predicted) == pytest.approx({"em": 2 / 5, "f1": (1 + 0.5 + 1 + 0.8 + 0) / 5})
    assert qa_scores([["a  b"]], ["A b."]) == {"em": 1.0, "f1": 1.0}  # whitespace runs are one
    assert qa_scores([["Paris"]], ["«Paris»"]) == {"em": 0.0, "f1": 0.0}  # SQuAD strips ASCII punctuation only
    with pytest.raises(ValueError):
        qa_scores([], [])


def test_mlqa_scores_follow_each_languages_rules():
    assert qa_scores([["Paris"]], ["«Paris»"], "en") == {"em": 1.0, "f1": 1.0}  # Unicode punctuation goes
    # German articles go for MLQA's de only: SQuAD's rules see [der hund] vs [hund]: P 1/2, R 1, F1 2/3
    assert qa_scores([["Hund"]], ["der Hund"], "de") == {"em": 1.0, "f1": 1.0}
    assert qa_scores([["Hund"]], ["der Hund"]) == pytest.approx({"em": 0.0, "f1": 2 / 3})
    assert qa_scores([["casa"]], ["la casa"], "es")["em"] == 1.0
    assert qa_scores([["كتاب"]], ["الكتاب"], "ar")["em"] == 1.0  # the article al- goes
    # Chinese: a token per character: [北 京 大 学] vs [北 京]: P 1/2, R 1, F1 2/3; one SQuAD token: none shared
    assert qa_scores([["北京"]], ["北京大学。"], "zh") == pytest.approx({"em": 0.0, "f1": 2 / 3})
    assert qa_scores([["北京"]], ["北京大学"]) == {"em": 0.0, "f1": 0.0}
    with pytest.raises(ValueError, match="no rules for language 'fr'"):
        qa_scores([["a"]], ["a"], "fr")


def test_mlqa_scores_each_set_in_its_language():
    pairs = [((0, ("der Hund",), "de"), (1.0, "Hund"))]
    assert MLQATask.score(pairs) == {"em": 1.0, "f1": 1.0}
    assert XQuADTask.score(pairs) == pytest.approx({"em": 0.0, "f1": 2 / 3})


def test_hub_schema_folders_and_the_split_each_test_set_is(tmp_path):
    save_qa(tmp_path, "squad", "en", (5, 3))
    save_qa(tmp_path, "xquad", "de", (4,))
    save_qa(tmp_path, "mlqa", "de", (2, 3))
    save_qa(tmp_path, "tydiqa", "sw", (3, 4), other_lang="en")
    read = lambda task, lang, split: read_split(task, str(tmp_path), lang, split)  # noqa: E731
    train, report = read(XQuADTask, "en", "train")  # SQuAD's training set, for every QA task
    source = rows("squad", "en", 5, 0)
    assert [e.question for e in train] == source["question"] and report.path.endswith("squad/en[train]")
    assert [(e.answers, e.starts) for e in train] == [
        ((a["text"][0],), (a["answer_start"][0],)) for a in source["answers"]
    ]
    assert len(read(MLQATask, "en", "validation")[0]) == 3  # SQuAD's dev set selects
    test, report = read(XQuADTask, "de", "test")  # XQuAD's only Hub split, validation, is its test set
    assert len(test) == 4 and report.path.endswith("xquad/de[validation]") and test[0].lang == "de"
    assert len(read(MLQATask, "de", "test")[0]) == 3 and len(read(MLQATask, "de", "validation")[0]) == 2
    test, report = read(TyDiQATask, "sw", "test")  # GoldP's dev set, the English rows passed over
    assert [e.id.split("-")[0] for e in test] == ["swahili"] * 4 and report.malformed == 0
    assert report.path.endswith("tydiqa/sw[validation]")
    with pytest.raises(InputError, match="xquad: de has no validation set"):
        read(XQuADTask, "de", "validation")  # XQuAD has no dev set to select on
    with pytest.raises(InputError, match="tydiqa: sw has no validation set"):
        read(TyDiQATask, "sw", "validation")


def test_tydiqa_trained_on_its_own_english_set(setup, tmp_path, monkeypatch):
    """XTREME's SRC=tydiqa: the English train and dev sets are TyDiQA-GoldP's own (the Hub config's ``train`` and
    ``validation`` splits, their ``english-`` rows), not SQuAD's; the test sets are unchanged; a Hub load asks for
    them; no other task has the choice."""
    import datasets

    save_qa(tmp_path, "squad", "en", (5, 3))
    save_qa(tmp_path, "tydiqa", "en", (4, 2), seed=1, other_lang="sw")  # every language in one Hub config
    save_qa(tmp_path, "tydiqa", "sw", (3, 4), other_lang="en")

    def read(lang, split, train_set):
        return read_split(TyDiQATask, str(tmp_path), lang, split, train_set=train_set)

    train, report = read("en", "train", "tydiqa")
    assert [e.question for e in train] == rows("tydiqa", "en", 4, 10)["question"]
    assert [e.id.split("-")[0] for e in train] == ["english"] * 4 and report.path.endswith("tydiqa/en[train]")
    dev, report = read("en", "validation", "tydiqa")  # its English dev set, which is also the English test set
    assert [e.id for e in dev] == [e.id for e in read("en", "test", "tydiqa")[0]] == rows("tydiqa", "en", 2, 11)["id"]
    assert report.path.endswith("tydiqa/en[validation]")
    for default in ("", "squad"):  # XTREME's default: SQuAD v1.1
        train, report = read("en", "train", default)
        assert len(train) == 5 and report.path.endswith("squad/en[train]")
    test, report = read("sw", "test", "tydiqa")
    assert len(test) == 4 and report.path.endswith("tydiqa/sw[validation]")
    with pytest.raises(InputError, match="tydiqa: sw has no validation set"):
        read("sw", "validation", "tydiqa")
    with pytest.raises(InputError, match=r"xquad: no training set 'tydiqa' \(it trains on squad\)"):
        read_split(XQuADTask, str(tmp_path), "en", "train", train_set="tydiqa")

    from distalign.eval.checkpoint_eval import resolve_model
    from distalign.transfer.zero_shot import FineTuneOverrides, TransferSpec, prepare

    model = setup[1]  # the runner's preparation (no Ray) trains on what the spec names
    spec = TransferSpec(
        model=model,
        tasks=("tydiqa",),
        data_dir=str(tmp_path),
        languages=("sw",),
        tydiqa_train="tydiqa",
        finetune=FineTuneOverrides(batch_size=2, max_length=MAX_LENGTH),
    )
    [prepared] = prepare(spec, resolve_model(None, model), progress=lambda *_: None)
    assert [r.path.rsplit("/", 2)[-2:] for r in prepared.reports] == [
        ["tydiqa", "en[train]"],
        ["tydiqa", "en[validation]"],
        ["tydiqa", "en[validation]"],
        ["tydiqa", "sw[validation]"],
    ]
    trained = {tuple(a["text"]) for a in rows("tydiqa", "en", 4, 10)["answers"]}
    assert {f["gold"][0] for f in prepared.data.train} == trained

    asked = []
    monkeypatch.setattr(
        datasets,
        "load_dataset",
        lambda name, config, split: (
            asked.append((name, config, split))
            or datasets.Dataset.from_dict(rows("tydiqa", "en", 2, 0), features=FEATURES["tydiqa"])
        ),
    )
    for split in ("train", "validation"):
        read_split(TyDiQATask, "", "en", split, hub=True, train_set="tydiqa")
    assert asked == [("tydiqa", "secondary_task", "train"), ("tydiqa", "secondary_task", "validation")]


def test_squad_json_with_bad_questions(tmp_path):
    data = rows("xquad", "de", 4, 0)
    data["answers"][1] = {"text": [data["answers"][1]["text"][0]], "answer_start": [1]}  # not where the text is
    data["context"][2] = " "
    path = squad_json(tmp_path / "xquad" / "de" / "test.json", data)
    examples, report = read_split(XQuADTask, str(tmp_path), "de", "test")
    assert [e.id for e in examples] == [data["id"][0], data["id"][3]] and report.malformed == 2
    assert report.examples[0].startswith(f"{path}:data[0].paragraphs[1].qas[0] (id '{data['id'][1]}'): answer ")
    assert report.examples[1] == f"{path}:data[0].paragraphs[2].qas[0] (id '{data['id'][2]}'): empty context"
    bad = tmp_path / "mlqa" / "de" / "test.json"
    bad.parent.mkdir(parents=True)
    bad.write_text("[1, 2]")
    with pytest.raises(InputError, match="not a SQuAD JSON file"):
        read_split(MLQATask, str(tmp_path), "de", "test")


def test_the_hub_path_asks_for_each_data_set_config_and_split(monkeypatch):
    import datasets
    from qa_data import FEATURES

    asked = []

    def load_dataset(name, config, split):
        asked.append((name, config, split))
        return datasets.Dataset.from_dict(
            rows("tydiqa" if name == "tydiqa" else "squad", "sw" if name == "tydiqa" else "en", 2, 0),
            features=FEATURES["squad"],
        )

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    for task, lang, split in [
        (XQuADTask, "en", "train"),
        (XQuADTask, "de", "test"),
        (MLQATask, "de", "test"),
        (MLQATask, "de", "validation"),
        (TyDiQATask, "sw", "test"),
    ]:
        read_split(task, "", lang, split, hub=True)
    read_split(MLQATask, "", "de", "test", hub=True, hub_configs={"mlqa:de": "mlqa.de.en"})
    assert asked == [
        ("squad", "plain_text", "train"),
        ("xquad", "xquad.de", "validation"),
        ("mlqa", "mlqa.de.de", "test"),
        ("mlqa", "mlqa.de.de", "validation"),
        ("tydiqa", "secondary_task", "validation"),
        ("mlqa", "mlqa.de.en", "test"),
    ]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("qa")
    save_qa(root / "data", "squad", "en", (16, 6))
    for lang in ("en", "de"):
        save_qa(root / "data", "xquad", lang, (6,), seed=1)
    model = tiny_model(root / "model")
    return root / "data", str(model), load_tokenizer(str(model))


@pytest.fixture
def short_windows(monkeypatch):
    monkeypatch.setattr(QATask, "doc_stride", STRIDE)


def features(data_dir, tokenizer, lang, split):
    examples, _ = read_split(XQuADTask, str(data_dir), lang, split)
    return compact(XQuADTask.encode(examples, tokenizer, MAX_LENGTH))


def task_data(data_dir, tokenizer):
    return TaskData(
        features(data_dir, tokenizer, "en", "train"),
        {"en": features(data_dir, tokenizer, "en", "validation")},
        {lang: features(data_dir, tokenizer, lang, "test") for lang in ("en", "de")},
    )


def test_a_tiny_fine_tune_and_what_reaches_the_loss(setup, short_windows, gloo_group, monkeypatch):
    """A tiny fine-tune, end to end: each training row's start/end, read back from the batch that reached the loss,
    spell the answer of the row's question; a row points at CLS (position 0) exactly when its window lacks the whole
    answer; the run ends with EM and F1 on each test language."""
    data_dir, model, tokenizer = setup
    batches, seen = [], []
    real_collate, real_loss = finetune.collate, finetune.task_loss
    monkeypatch.setattr(finetune, "collate", lambda f, pad: batches.append(real_collate(f, pad)) or batches[-1])
    monkeypatch.setattr(
        finetune,
        "task_loss",
        lambda logits, labels: seen.append((batches[-1]["input_ids"], labels.clone())) or real_loss(logits, labels),
    )
    data = task_data(data_dir, tokenizer)
    job = FineTuneJob(
        task="xquad",
        seed=0,
        model_path=model,
        settings=FineTuneSettings(lr=1e-3, batch_size=8, epochs=1, max_length=MAX_LENGTH, source="test"),
    )
    result = fine_tune(job, data, tokenizer.pad_token_id, 0, 1, torch.device("cpu"))
    assert set(result["test"]) == {"en", "de"} and [h["epoch"] for h in result["history"]] == [1]
    for scores in result["test"].values():
        assert set(scores) == {"em", "f1"} and 0 <= scores["em"] <= scores["f1"] <= 1
    assert sum(len(labels) for _, labels in seen) == len(data.train)  # the last partial batch too
    names, places, verbs = LEXICON["en"]
    answered = 0
    for ids, labels in seen:
        for row, (start, end) in zip(ids.tolist(), labels.tolist()):
            sep = row.index(tokenizer.sep_token_id)
            verb, place = tokenizer.decode(row[1:sep]).split()
            answer = answer_of("en", verbs.index(verb), places.index(place))
            window = tokenizer.decode(row[sep:], skip_special_tokens=True).split()
            if (start, end) == (0, 0):
                assert answer not in window
            else:
                assert tokenizer.decode(row[start : end + 1]).strip() == answer and answer in window
                answered += 1
    assert 0 < answered < sum(len(labels) for _, labels in seen)  # windows with and without the answer


def test_mbert_layout_segments_and_offsets(short_windows):
    """[CLS] question [SEP] context [SEP]: offsets on the context's tokens only (-1 elsewhere), the answer's characters
    exactly (WordPiece offsets leave out spaces), CLS where a window lacks it."""
    context = "Anna sees Berlin, and Peter likes Paris. Maria visits Rome today."
    tokenizer = wordpiece_tokenizer([context, "who likes paris"] * 20, vocab_size=60)
    example = QAExample("q", "Who likes Paris?", context, ("Peter",), (context.index("Peter"),), "en")
    windows = XQuADTask.encode([example], tokenizer, 16)
    assert len(windows) > 2
    holding = 0
    for f in windows:
        context_tokens = np.flatnonzero(f["offsets"][:, 0] >= 0)
        ids = f["input_ids"]
        assert context_tokens.tolist() == list(range(ids.index(tokenizer.sep_token_id) + 1, len(ids) - 1))
        start, end = f["labels"]
        window = context[f["offsets"][context_tokens[0], 0] : f["offsets"][context_tokens[-1], 1]]
        if "Peter" in window:
            assert context[f["offsets"][start, 0] : f["offsets"][end, 1]] == "Peter"
            holding += 1
        else:
            assert (start, end) == (0, 0) and f["input_ids"][0] == tokenizer.cls_token_id
    assert 0 < holding < len(windows)


def test_the_best_span_over_an_examples_windows(setup, short_windows):
    """Two windows of one context, each given a span by hand-set logits: the answer's window scores higher and wins;
    a higher score on a question token is no span. Then the span-length limit and a window without context."""
    _, _, tokenizer = setup
    context = "maria likes paris anna visits paris peter sees rome"
    example = QAExample("q", "visits paris", context, ("anna",), (context.index("anna"),), "en")
    windows = compact(XQuADTask.encode([example], tokenizer, MAX_LENGTH))
    holding = [f for f in windows if tuple(f["labels"]) != (0, 0)]
    assert len(windows) > 2 and len(holding) >= 1
    answer = holding[0]
    other = next(f for f in windows if f is not answer)  # a window without the answer
    length = max(len(f["input_ids"]) for f in (answer, other))
    logits = torch.zeros(2, 2, length)
    first_context = int(np.flatnonzero(other["offsets"][:, 0] >= 0)[0])
    logits[0, 0, first_context] = logits[0, 1, first_context] = 3.0  # a valid span of `other`: score 6
    logits[0, 0, 1] = logits[0, 1, 1] = 9.0  # a question token: not a span of the context
    start, end = answer["labels"]
    logits[1, 0, start] = logits[1, 1, end] = 4.0  # the answer in its window: score 8
    pairs = XQuADTask.predictions(logits, None, [other, answer])
    assert pairs[0][1] == (
        6.0,
        context[other["offsets"][first_context, 0] : other["offsets"][first_context, 1]].strip(),
    )
    assert pairs[1][1] == (8.0, "anna")
    assert XQuADTask.score(pairs) == {"em": 1.0, "f1": 1.0}
    assert XQuADTask.score(pairs[:1])["em"] == 0.0  # with only the other window, its span is the answer

    offsets = np.tile(np.arange(40, dtype=np.int32)[:, None], (1, 2))
    starts, ends = np.zeros(40), np.zeros(40)
    starts[0], ends[MAX_ANSWER_TOKENS] = 5.0, 5.0  # 31 tokens: too long
    ends[MAX_ANSWER_TOKENS - 1] = 1.0
    assert QATask.best_span(starts, ends, offsets) == (6.0, 0, MAX_ANSWER_TOKENS - 1)
    offsets[:] = -1  # no context token: no span
    assert QATask.best_span(starts, ends, offsets) is None


def test_the_answer_text_is_xtremes_word_level_text_not_the_subword_offsets(setup):
    """By hand, on an uncased WordPiece tokenizer (mBERT's layout): the predicted span's text is that of the whole
    words it touches, cut back to the subwords' own text where that text is found in them (run_squad.py's
    ``get_final_text``), in the original case and accents."""
    from distalign.transfer.tasks.qa import answer_text, final_text, lowercases

    context = "Anna was born in São Paulo's east in the 1990s, near U.S.-based firms."
    tokenizer = wordpiece_tokenizer([context] * 20, vocab_size=70)
    assert lowercases(tokenizer) and not lowercases(setup[2])  # the tiny model's: cased SentencePiece, as XLM-R
    [feature] = XQuADTask.encode(
        [QAExample("q", "born where", context, ("São Paulo",), (context.index("São Paulo"),), "en")], tokenizer, 64
    )
    tokens = tokenizer.convert_ids_to_tokens(feature["input_ids"])

    def token_at(char: int) -> int:
        return next(i for i, (a, b) in enumerate(feature["offsets"]) if a <= char < b)

    def predicted(first: int, last: int) -> tuple[str, str]:
        """(text by the offsets, text reported) of the span from the token over character ``first`` to the one over
        character ``last``."""
        start, end = token_at(first), token_at(last)
        logits = torch.full((1, 2, len(feature["input_ids"])), -5.0)
        logits[0, 0, start] = logits[0, 1, end] = 5.0
        [(_, (_, text))] = XQuADTask.predictions(logits, None, [feature])
        return context[feature["offsets"][start, 0] : feature["offsets"][end, 1]], text

    # "1990s" is "1990" "##s": a span from "##s" is written "##s", which is no part of the words: the whole word
    s = context.index("1990s") + 4
    assert tokens[token_at(s)] == "##s"
    assert predicted(s, s) == ("s", "1990s,")  # the word with its comma, as XTREME reports it
    # the uncased subwords "sa ##o pa ##ul ##o" are "sao paulo": found in "sao paulo ' s", given back as written
    paulo = context.index("São Paulo")
    assert predicted(paulo, paulo + 8) == ("São Paulo", "São Paulo")
    assert predicted(paulo + 6, paulo + 8) == ("ulo", "Paulo's")  # "##ul ##o": the whole (whitespace) word
    us = context.index("U.S.")
    assert predicted(us, us + 3) == ("U.S.", "U.S.")  # "u . s ." is in "u . s . - based"
    # a cased SentencePiece model (XLM-R) writes "U.S." with no spaces: not found in "U . S . - based"
    assert final_text("U.S.", "U.S.-based", lowercase=False) == "U.S.-based"
    assert final_text("paulo", "São Paulo", lowercase=False) == "São Paulo"  # cased: "paulo" is not "Paulo"
    assert final_text("Paulo", "São Paulo", lowercase=False) == "Paulo"
    # words joined by one space whatever stood between them; a span that starts on a space starts at the next word
    assert answer_text("in New\n\n York today", 3, 13, "new york", lowercase=True) == "New York"
    assert answer_text("in New York", 2, 6, "new", lowercase=True) == "New"


def test_the_runner_trains_on_squad_and_refuses_to_select_on_xquad(setup, short_windows):
    """The driver's preparation (no Ray): SQuAD's train and dev sets, XQuAD's test sets; no XQuAD dev set to
    select on."""
    from distalign.eval.checkpoint_eval import resolve_model
    from distalign.transfer.zero_shot import FineTuneOverrides, TransferSpec, prepare

    data_dir, model, tokenizer = setup
    spec = TransferSpec(
        model=model,
        tasks=("xquad",),
        data_dir=str(data_dir),
        languages=("de",),
        finetune=FineTuneOverrides(batch_size=8, max_length=MAX_LENGTH),
    )
    [prepared] = prepare(spec, resolve_model(None, model), progress=lambda *_: None)
    expected = task_data(data_dir, tokenizer)
    assert len(prepared.data.train) == len(expected.train) > 16  # 16 questions, several windows each
    assert {lang: len(f) for lang, f in prepared.data.test.items()} == {
        lang: len(f) for lang, f in expected.test.items()
    }
    assert list(prepared.data.dev) == ["en"] and prepared.settings.lr == 3e-5 and prepared.settings.epochs == 3
    spec.select_on = "target"
    with pytest.raises(InputError, match="xquad: de has no validation set"):
        prepare(spec, resolve_model(None, model), progress=lambda *_: None)


def test_prediction_rows_are_each_examples_best_answer():
    from distalign.transfer.tasks.qa import XQuADTask

    pairs = [
        ((0, ["anna"], "en"), (1.0, "peter")),
        ((0, ["anna"], "en"), (2.0, "anna")),
        ((1, ["rome"], "en"), (float("-inf"), "")),
    ]  # example 0 over two features; no valid span for 1
    assert XQuADTask.prediction_rows(pairs) == [
        {"id": 0, "gold": ["anna"], "predicted": "anna"},
        {"id": 1, "gold": ["rome"], "predicted": ""},
    ]
