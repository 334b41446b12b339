"""Token classification (NER on WikiANN / PAN-X, POS on Universal Dependencies): a label per word, carried by
the word's first subword (``first_subword_labels``); entity F1 for NER, accuracy for POS."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

from distalign.data.readers import ReadReport
from distalign.errors import InputError
from distalign.transfer.metrics import IGNORE, accuracy, entity_scores, first_subword_labels
from distalign.transfer.tasks.base import (
    XTREME_TAG,
    FineTuneSettings,
    TransferTask,
    class_label_names,
    require_columns,
)


@dataclass(frozen=True)
class TaggedSentence:
    words: tuple[str, ...]
    tags: tuple[int, ...]  # label ids, one per word


class TokenTask(TransferTask):
    """The family: a sentence as its words, a label per word."""

    model_class: ClassVar[str] = "AutoModelForTokenClassification"
    tag_column: ClassVar[str]  # the Hub schema's column of label ids (beside "tokens")

    @classmethod
    def check(cls, words: list[str], tags: list) -> str:
        """Why a sentence cannot be used ("" if it can)."""
        if not words:
            return "no words"
        if len(words) != len(tags):
            return f"{len(words)} words but {len(tags)} tags"
        if any(not isinstance(w, str) or not w.strip() for w in words):
            return "an empty word"
        bad = [t for t in tags if t is None]
        return f"{len(bad)} tags not among {list(cls.labels)}" if bad else ""

    @classmethod
    def from_rows(cls, dataset, where: str, report: ReadReport, lang: str) -> list[TaggedSentence]:
        require_columns(dataset, ("tokens", cls.tag_column), where)
        names = class_label_names(dataset, cls.tag_column, where)
        sentences = []
        for index, row in enumerate(dataset):
            words, tags = list(row["tokens"]), [cls.row_label(t, names) for t in row[cls.tag_column]]
            problem = cls.check(words, tags)
            if problem:
                report.skip(index, problem)
            else:
                sentences.append(TaggedSentence(tuple(words), tuple(tags)))
        report.rows = len(sentences)
        return sentences

    @classmethod
    def encode(cls, examples: list[TaggedSentence], tokenizer, max_length: int) -> list[dict]:
        """Subword inputs with each word's label on its first subword; words cut off by ``max_length`` lose theirs
        (``words`` keeps the count, so the runner can say how many)."""
        encoded = tokenizer(
            [list(e.words) for e in examples], is_split_into_words=True, truncation=True, max_length=max_length
        )
        return [
            {
                "input_ids": ids,
                "attention_mask": mask,
                "labels": first_subword_labels(encoded.word_ids(i), e.tags),
                "words": len(e.words),
            }
            for i, (ids, mask, e) in enumerate(zip(encoded["input_ids"], encoded["attention_mask"], examples))
        ]

    @classmethod
    def predictions(cls, logits, labels, features) -> list[tuple[list[int], list[int]]]:
        predicted, labels = logits.argmax(-1).cpu(), labels.cpu()  # to the host once a batch, not once a row
        kept = labels != IGNORE
        return [(gold[keep].tolist(), pred[keep].tolist()) for gold, pred, keep in zip(labels, predicted, kept)]


class WikiANNTask(TokenTask):
    """NER on WikiANN (Pan et al. 2017; XTREME's PAN-X, with Rahimi et al.'s splits): PER/ORG/LOC in BIO tags."""

    name: ClassVar[str] = "wikiann"
    hub_name: ClassVar[str] = "wikiann"  # configs: language codes (176 languages)
    labels: ClassVar[tuple[str, ...]] = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC")  # the Hub's order
    tag_column: ClassVar[str] = "ner_tags"
    main_metric: ClassVar[str] = "f1"
    settings: ClassVar[FineTuneSettings] = replace(XTREME_TAG, select_every=1000)
    file_suffix: ClassVar[str] = "conll"

    @classmethod
    def read_file(cls, path: Path, lang: str, report: ReadReport) -> list[TaggedSentence]:
        """CoNLL: ``word<TAB>tag`` (or space-separated; word first, tag last) per line, a blank line between
        sentences, ``-DOCSTART-`` lines ignored; XTREME's ``<lang>:`` prefix on words is removed."""
        prefix = f"{lang}:"
        sentences, words, tags = [], [], []
        first_line, problem = 0, None  # problem: (line, why) of the first bad line of the sentence

        def close() -> None:
            nonlocal words, tags, problem
            if words or problem:
                why = cls.check(words, tags)
                if problem or why:
                    report.skip(*(problem or (first_line, why)))
                else:
                    sentences.append(TaggedSentence(tuple(words), tuple(tags)))
            words, tags, problem = [], [], None

        with path.open(encoding="utf-8") as f:
            for line_no, line in enumerate(f, start=1):
                line = line.rstrip("\r\n")
                if not line.strip():
                    close()
                    continue
                if line.startswith("-DOCSTART-"):
                    continue
                if not words and not problem:
                    first_line = line_no
                fields = line.split("\t") if "\t" in line else line.split()
                tag = cls.label_id(fields[-1]) if len(fields) >= 2 else None
                if tag is None:
                    problem = problem or (
                        line_no,
                        f"expected 'word<TAB>tag' with a tag among {list(cls.labels)}, got {line!r}",
                    )
                    continue
                words.append(fields[0].removeprefix(prefix))
                tags.append(tag)
        close()
        report.rows = len(sentences)
        return sentences

    @classmethod
    def score(cls, pairs) -> dict[str, float]:
        names = cls.labels
        return entity_scores(
            [[names[t] for t in gold] for gold, _ in pairs], [[names[t] for t in pred] for _, pred in pairs]
        )


# The Hub's universal_dependencies upos ClassLabel order ("_" = no tag given)
UPOS = (
    "NOUN",
    "PUNCT",
    "ADP",
    "NUM",
    "SYM",
    "SCONJ",
    "ADJ",
    "PART",
    "DET",
    "CCONJ",
    "PROPN",
    "PRON",
    "X",
    "_",
    "ADV",
    "INTJ",
    "VERB",
    "AUX",
)


class UDPOSTask(TokenTask):
    """POS tagging on Universal Dependencies (Nivre et al.): the 17 universal tags, per-word accuracy.

    XTREME pools all treebanks of a language; the Hub serves one treebank per config (``en_ewt``): pick
    one per language with ``hub_configs`` (``udpos:de=de_hdt``), or save a pooled one with ``save_to_disk``.
    """

    name: ClassVar[str] = "udpos"
    hub_name: ClassVar[str] = "universal_dependencies"
    labels: ClassVar[tuple[str, ...]] = UPOS
    tag_column: ClassVar[str] = "upos"
    main_metric: ClassVar[str] = "acc"
    settings: ClassVar[FineTuneSettings] = replace(XTREME_TAG, select_every=500)
    file_suffix: ClassVar[str] = "conllu"
    # one treebank per language for the Hub path, the largest UD 2.7 treebank where there are several
    treebanks: ClassVar[dict[str, str]] = {
        "en": "en_ewt",
        "de": "de_gsd",
        "fr": "fr_gsd",
        "es": "es_gsd",
        "it": "it_isdt",
        "pt": "pt_bosque",
        "nl": "nl_alpino",
        "ru": "ru_syntagrus",
        "fi": "fi_tdt",
        "tr": "tr_imst",
        "ar": "ar_padt",
        "hi": "hi_hdtb",
        "zh": "zh_gsd",
        "ja": "ja_gsd",
        "ko": "ko_kaist",
    }

    @classmethod
    def hub_config(cls, lang: str, configs: dict[str, str]) -> str:
        config = configs.get(f"{cls.name}:{lang}") or cls.treebanks.get(lang)
        if not config:
            raise InputError(
                f"udpos: no Universal Dependencies treebank known for {lang!r}: name one with "
                f"hub_configs (--hub-config udpos:{lang}=<treebank>, e.g. {lang}_gsd)"
            )
        return config

    @classmethod
    def read_file(cls, path: Path, lang: str, report: ReadReport) -> list[TaggedSentence]:
        """CoNLL-U (read by the ``conllu`` package): each sentence's syntactic words and their UPOS; multi-word
        token lines (``1-2``) and empty nodes (``1.1``) are left out, as UD's word-level tags ask."""
        import conllu

        sentences = []
        for start, block in _blocks(path):
            try:
                parsed = conllu.parse(block)
            except conllu.exceptions.ParseException as err:
                report.skip(start, f"not CoNLL-U: {err}")
                continue
            for sentence in parsed:
                words = [t for t in sentence if isinstance(t["id"], int)]
                tags = [cls.label_id(t["upos"] or "_") for t in words]
                problem = cls.check([t["form"] for t in words], tags)
                if problem:
                    report.skip(start, problem)
                else:
                    sentences.append(TaggedSentence(tuple(t["form"] for t in words), tuple(tags)))
        report.rows = len(sentences)
        return sentences

    @classmethod
    def score(cls, pairs) -> dict[str, float]:
        return {"acc": accuracy([t for gold, _ in pairs for t in gold], [t for _, pred in pairs for t in pred])}


def _blocks(path: Path):
    """(first line number, text) of each blank-line-separated block of a file."""
    lines, start = [], 0
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if line.strip():
                if not lines:
                    start = line_no
                lines.append(line)
            elif lines:
                yield start, "".join(lines) + "\n"
                lines = []
    if lines:
        yield start, "".join(lines) + "\n"
