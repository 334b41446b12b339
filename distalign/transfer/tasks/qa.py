"""Extractive QA (XQuAD, MLQA, TyDiQA-GoldP), fine-tuned on SQuAD v1.1 as XTREME does: the answer is a span of
the context, predicted as a start and an end token; exact match and F1 against the gold answers.

A long context is cut into several features (windows of ``max_length`` tokens, question included, each
``doc_stride`` context tokens after the previous); a feature whose window does not hold the whole answer is
trained to point at the CLS token. At test time every feature proposes its best span (of the ``N_BEST`` best
starts x ends: inside the context, end >= start, at most ``MAX_ANSWER_TOKENS`` tokens; score = start + end
logit), the example's answer is the best over its features. Its text is XTREME's (run_squad.py, the SQuAD reference
code): the whitespace-separated words of the context the span's first and last subword lie in, joined by single
spaces, then cut back to the predicted subwords' own text where that text can be found in the words (``final_text``).

Data (``data_source``): the source language's ``train`` and ``validation`` are SQuAD v1.1's (Hub ``squad``,
or ``<data_dir>/squad/en/``), or for TyDiQA-GoldP with ``train_set="tydiqa"`` its own English ones (XTREME's
``SRC=tydiqa``); the test sets come from each task's data set.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from tokenizers import decoders, normalizers, pre_tokenizers

from distalign.data.readers import ReadReport
from distalign.errors import InputError
from distalign.transfer.metrics import qa_scores
from distalign.transfer.tasks.base import DataSource, FineTuneSettings, TransferTask, require_columns

if TYPE_CHECKING:
    import torch

# XTREME (Hu et al. 2020) github.com/google-research/xtreme scripts/train_qa.sh at commit 0918248 (2021-08-11):
# batch 4 per GPU x 8 accumulated = 32, lr 3e-5, 3 epochs (2 epochs with batch 4 x 4 before that commit),
# max length 384, doc stride 128, 500 warm-up steps, weight decay 1e-4; run_squad.py's defaults for the rest
# (max query length 64, n-best 20, max answer length 30, AdamW eps 1e-8, gradient norm 1.0). It keeps the
# final weights (--save_steps -1); here the end of each epoch is a candidate, the final weights among them.
XTREME_QA = FineTuneSettings(
    lr=3e-5,
    batch_size=32,
    epochs=3,
    max_length=384,
    source="XTREME scripts/train_qa.sh (commit 0918248; bert-base-multilingual-cased, xlm-roberta-base)",
    weight_decay=1e-4,
    warmup_steps=500,
)
MAX_QUERY_TOKENS = 64  # run_squad.py --max_query_length: longer questions are cut
N_BEST = 20  # --n_best_size: the best starts and ends looked at per feature
MAX_ANSWER_TOKENS = 30  # --max_answer_length, in subword tokens


WORD = re.compile(r"[^ \t\r\n\u202f]+")  # run_squad.py's whitespace: space, tab, CR, LF and U+202F


def final_text(predicted: str, words: str, lowercase: bool) -> str:
    """The part of ``words`` (the original text) that the tokenizer's text of the predicted subwords, ``predicted``,
    stands for, or all of ``words`` where it cannot be placed. As run_squad.py's ``get_final_text``: ``words`` is
    split as BERT's basic tokenizer splits it (punctuation apart; lower-cased and accents stripped with
    ``lowercase``), ``predicted`` is looked for in that (its first occurrence), and the place found is carried back
    to ``words`` character by character, spaces left out on both sides (if they then differ in length, all of
    ``words``). This drops the tokenizer's normalisation (case, accents) from the answer."""
    normalised = normalizers.BertNormalizer(lowercase=lowercase).normalize_str(words)
    split = " ".join(piece for piece, _ in pre_tokenizers.BertPreTokenizer().pre_tokenize_str(normalised))
    found = split.find(predicted)
    if not predicted or found < 0:
        return words
    kept_split = [i for i, char in enumerate(split) if char != " "]
    kept_words = [i for i, char in enumerate(words) if char != " "]
    if len(kept_split) != len(kept_words):
        return words
    first = bisect.bisect_left(kept_split, found)  # ``predicted`` has no edge spaces: these are its ends
    last = bisect.bisect_left(kept_split, found + len(predicted) - 1)
    return words[kept_words[first] : kept_words[last] + 1]


def answer_text(context: str, start: int, end: int, predicted: str, lowercase: bool) -> str:
    """The answer to report for the span ``context[start:end]`` (its subwords' character offsets) whose subwords the
    tokenizer writes as ``predicted``: the whole words it touches, cut by ``final_text``."""
    words = [m.span() for m in WORD.finditer(context)]
    starts = [w[0] for w in words]
    first = max(bisect.bisect_right(starts, start) - 1, 0)
    if words and start >= words[first][1]:  # the span starts on a space: the next word
        first += 1
    last = bisect.bisect_right(starts, max(end - 1, start)) - 1
    if not words or first >= len(words) or last < first:
        return context[start:end].strip()
    return final_text(
        " ".join(predicted.split()), " ".join(context[a:b] for a, b in words[first : last + 1]), lowercase
    )


def subword_text(tokenizer, ids: list[int]) -> str:
    """The text of the subwords ``ids`` as the tokenizer writes them (run_squad.py's ``convert_tokens_to_string``):
    BERT's "u . s ." for u . s ., a leading "##" kept; XLM-R's "U.S.". A WordPiece decoder's tidying of the spaces
    before punctuation ("u. s.") is left out: the slow tokenizers XTREME ran with did not do it."""
    tokens = tokenizer.convert_ids_to_tokens(ids)
    decoder = tokenizer.backend_tokenizer.decoder
    if isinstance(decoder, decoders.WordPiece):
        return decoders.WordPiece(prefix=decoder.prefix, cleanup=False).decode(tokens)
    return tokenizer.convert_tokens_to_string(tokens)


def lowercases(tokenizer) -> bool:
    """Whether the tokenizer lower-cases its input (uncased mBERT; run_squad.py's ``--do_lower_case``)."""
    normalizer = tokenizer.backend_tokenizer.normalizer
    return normalizer is not None and normalizer.normalize_str("A") == "a"


@dataclass(frozen=True)
class QAExample:
    id: str
    question: str
    context: str
    answers: tuple[str, ...]  # the gold answers' texts
    starts: tuple[int, ...]  # their character offsets in ``context``
    lang: str  # the language scored (MLQA's normalisation depends on it)


class QATask(TransferTask):
    """The family: a question and a context, an answer span; F1 and exact match."""

    labels: ClassVar[tuple[str, ...]] = ("start", "end")  # the QA head's two outputs per token
    main_metric: ClassVar[str] = "f1"
    settings: ClassVar[FineTuneSettings] = XTREME_QA
    file_suffix: ClassVar[str] = "json"
    model_class: ClassVar[str] = "AutoModelForQuestionAnswering"
    doc_stride: ClassVar[int] = 128  # context tokens between the starts of two windows of one example
    test_split: ClassVar[str] = "test"  # the Hub split that holds the test set
    id_prefixes: ClassVar[dict[str, str]] = {}  # a data set of all languages: lang -> the prefix of its ids
    per_language_scoring: ClassVar[bool] = False  # MLQA's evaluation (language-aware normalisation) or SQuAD's
    config_pattern: ClassVar[str] = "{lang}"  # the Hub config of a language
    own_train_sets: ClassVar[tuple[str, ...]] = ()  # a train_set naming the task's own English training data

    @classmethod
    def hub_config(cls, lang: str, configs: dict[str, str]) -> str:
        return configs.get(f"{cls.name}:{lang}", cls.config_pattern.format(lang=lang))

    @classmethod
    def data_source(cls, lang: str, split: str, configs: dict[str, str], train_set: str = "") -> DataSource:
        if train_set not in ("", "squad", *cls.own_train_sets):
            raise InputError(
                f"{cls.name}: no training set {train_set!r} (it trains on "
                f"{' or '.join(('squad', *cls.own_train_sets))})"
            )
        if lang == "en" and split in ("train", "validation"):
            if train_set in cls.own_train_sets:  # its own English train, and its English dev (= test) set
                return DataSource(cls.name, cls.hub_name, cls.hub_config(lang, configs), split)
            return DataSource("squad", "squad", "plain_text", split)  # XTREME: SQuAD v1.1's train and dev sets
        hub_split = cls.test_split if split == "test" else split
        if split != "test" and hub_split == cls.test_split:
            raise InputError(
                f"{cls.name}: {lang} has no {split} set (the Hub's {hub_split!r} split is its test set); "
                "select on the source language (SQuAD's dev set)"
            )
        return DataSource(cls.name, cls.hub_name, cls.hub_config(lang, configs), hub_split)

    @classmethod
    def check(cls, context, question, answers: list, starts: list) -> str:
        """Why a question cannot be used ("" if it can). The first answer is the training label: its
        ``answer_start`` must point at its text; the others are scored by their text alone."""
        if not isinstance(context, str) or not context.strip():
            return "empty context"
        if not isinstance(question, str) or not question.strip():
            return "empty question"
        if not answers or len(answers) != len(starts):
            return f"{len(answers)} answer texts but {len(starts)} answer starts" if answers else "no answer"
        if any(not isinstance(text, str) or not text.strip() for text in answers):
            return f"an empty answer text among {answers!r}"
        text, start = answers[0], starts[0]
        if not isinstance(start, int) or context[start : start + len(text)] != text:
            found = context[start : start + len(text)] if isinstance(start, int) else None
            return f"answer {text!r} is not at answer_start {start!r} of the context (found {found!r})"
        return ""

    @classmethod
    def from_rows(cls, dataset, where: str, report: ReadReport, lang: str) -> list[QAExample]:
        """The Hub's SQuAD schema (``id``, ``context``, ``question``, ``answers``: {``text``, ``answer_start``}); rows
        whose id names another language (TyDiQA's ``arabic-...``) are not ``lang``'s and are passed over."""
        require_columns(dataset, ("id", "context", "question", "answers"), where)
        if cls.id_prefixes and lang not in cls.id_prefixes:
            raise InputError(f"{cls.name}: no language {lang!r} in {where} (it has {sorted(cls.id_prefixes)})")
        others = tuple(prefix for other, prefix in cls.id_prefixes.items() if other != lang)
        examples = []
        for index, row in enumerate(dataset):
            if others and str(row["id"]).startswith(others):
                continue
            answers = row["answers"] or {}
            texts, starts = list(answers.get("text") or []), list(answers.get("answer_start") or [])
            problem = cls.check(row["context"], row["question"], texts, starts)
            if problem:
                report.skip(index, problem)
            else:
                examples.append(
                    QAExample(str(row["id"]), row["question"], row["context"], tuple(texts), tuple(starts), lang)
                )
        report.rows = len(examples)
        return examples

    @classmethod
    def read_file(cls, path: Path, lang: str, report: ReadReport) -> list[QAExample]:
        """SQuAD's JSON (XQuAD's, MLQA's and TyDiQA-GoldP's files too): ``{"data": [{"paragraphs": [{"context",
        "qas": [{"id", "question", "answers": [{"text", "answer_start"}]}]}]}]}``; a bad question is named by its
        place (``data[0].paragraphs[3].qas[1]``) and id."""
        try:
            articles = json.loads(path.read_text(encoding="utf-8"))["data"]
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise InputError(f'{path}: not a SQuAD JSON file ({{"data": [...]}}): {err}') from err
        examples = []
        for a, article in enumerate(articles):
            for p, paragraph in enumerate(article.get("paragraphs", [])):
                for q, qa in enumerate(paragraph.get("qas", [])):
                    answers = [x for x in qa.get("answers", []) if isinstance(x, dict)]
                    texts, starts = [x.get("text") for x in answers], [x.get("answer_start") for x in answers]
                    problem = cls.check(paragraph.get("context"), qa.get("question"), texts, starts)
                    if problem:
                        report.skip(f"data[{a}].paragraphs[{p}].qas[{q}] (id {qa.get('id')!r})", problem)
                    else:
                        examples.append(
                            QAExample(
                                str(qa.get("id")),
                                qa["question"],
                                paragraph["context"],
                                tuple(texts),
                                tuple(starts),
                                lang,
                            )
                        )
        report.rows = len(examples)
        return examples

    @classmethod
    def encode(cls, examples: list[QAExample], tokenizer, max_length: int) -> list[dict]:
        """One feature per window of each example, in order: ``labels`` = [start, end] token of the first gold
        answer, or [CLS, CLS] where the window does not hold it; ``offsets`` [T, 2]: each context token's
        characters (-1 elsewhere); ``example`` (its index in ``examples``), ``gold``, ``context`` and ``tokenizer`` (one
        object shared by all features, pickled once with them) for the answer's text."""
        query_tokens = min(MAX_QUERY_TOKENS, max_length // 2)  # a tiny max_length keeps half for the context
        specials = tokenizer.num_special_tokens_to_add(pair=True)
        questions = tokenizer([e.question for e in examples], add_special_tokens=False, return_offsets_mapping=True)
        # The tokenizer's stride is the overlap of two windows: what is left of a window after doc_stride. It
        # depends on the question's length, so the examples are tokenised in batches of equal overlap.
        by_overlap: dict[int, list[tuple[int, str]]] = {}
        for index, e in enumerate(examples):
            length = len(questions["input_ids"][index])
            text = e.question
            if length > query_tokens:  # cut the text after the last token kept
                text, length = e.question[: questions["offset_mapping"][index][query_tokens - 1][1]], query_tokens
            overlap = max(max_length - length - specials - cls.doc_stride, 0)
            by_overlap.setdefault(overlap, []).append((index, text))
        windows: dict[int, list[dict]] = {}
        for overlap, members in by_overlap.items():
            encoded = tokenizer(
                [text for _, text in members],
                [examples[i].context for i, _ in members],
                truncation="only_second",
                max_length=max_length,
                stride=overlap,
                return_overflowing_tokens=True,
                return_offsets_mapping=True,
            )
            for window, member in enumerate(encoded["overflow_to_sample_mapping"]):
                index = members[member][0]
                windows.setdefault(index, []).append(cls.window(encoded, window, examples[index], index, tokenizer))
        return [feature for index in range(len(examples)) for feature in windows[index]]

    @classmethod
    def window(cls, encoded, window: int, e: QAExample, index: int, tokenizer) -> dict:
        """The feature of one window of ``encoded`` (the tokenizer's output), example ``e`` at ``index``."""
        ids = encoded["input_ids"][window]
        in_context = np.array([s == 1 for s in encoded.sequence_ids(window)])
        offsets = np.where(in_context[:, None], np.asarray(encoded["offset_mapping"][window], dtype=np.int32), -1)
        context = np.flatnonzero(in_context)  # the window's context tokens, in order
        answer_start = e.starts[0]
        answer_end = answer_start + len(e.answers[0])
        if offsets[context[0], 0] <= answer_start and offsets[context[-1], 1] >= answer_end:
            # the last token starting at or before the answer, the first ending at or after it
            labels = [
                int(context[offsets[context, 0] <= answer_start][-1]),
                int(context[offsets[context, 1] >= answer_end][0]),
            ]
        else:
            labels = [ids.index(tokenizer.cls_token_id) if tokenizer.cls_token_id in ids else 0] * 2
        inputs = {
            key: encoded[key][window] for key in ("input_ids", "attention_mask", "token_type_ids") if key in encoded
        }
        return {
            **inputs,
            "labels": labels,
            "offsets": offsets,
            "example": index,
            "gold": (e.answers, e.lang),
            "context": e.context,
            "tokenizer": tokenizer,
        }

    @classmethod
    def logits(cls, outputs) -> torch.Tensor:
        """[B, 2, T]: the start and end logits as two positions to classify over the tokens, so that the shared
        cross-entropy with labels [B, 2] is (start loss + end loss) / 2, the QA heads' own loss."""
        import torch  # here, not at the top: the task registry (the command line's help) imports no torch

        return torch.stack([outputs.start_logits, outputs.end_logits], dim=1)

    @classmethod
    def best_span(
        cls, start_logits: np.ndarray, end_logits: np.ndarray, offsets: np.ndarray
    ) -> tuple[float, int, int] | None:
        """(score, start, end) of the best valid span among the ``N_BEST`` best starts x ends, None if none is valid."""
        best = None
        for start in np.argsort(-start_logits, kind="stable")[:N_BEST]:
            for end in np.argsort(-end_logits, kind="stable")[:N_BEST]:
                if offsets[start, 0] < 0 or offsets[end, 0] < 0 or end < start or end - start + 1 > MAX_ANSWER_TOKENS:
                    continue
                score = float(start_logits[start] + end_logits[end])
                if best is None or score > best[0]:
                    best = (score, int(start), int(end))
        return best

    @classmethod
    def predictions(cls, logits, labels, features) -> list[tuple[tuple, tuple]]:
        """((example, gold answers, lang), (score, answer text)) per feature; score -inf where no span is valid."""
        values = logits.detach().float().cpu().numpy()
        out = []
        for row, f in zip(values, features):
            n = len(f["input_ids"])
            span = cls.best_span(row[0, :n], row[1, :n], f["offsets"])
            answers, lang = f["gold"]
            predicted = (float("-inf"), "") if span is None else (span[0], cls.span_text(f, span[1], span[2]))
            out.append(((f["example"], answers, lang), predicted))
        return out

    @classmethod
    def span_text(cls, feature: dict, start: int, end: int) -> str:
        """The answer text of the tokens ``start..end`` of a feature (``answer_text``)."""
        tokenizer, ids = feature["tokenizer"], [int(i) for i in feature["input_ids"][start : end + 1]]
        predicted = subword_text(tokenizer, ids)
        return answer_text(
            feature["context"],
            int(feature["offsets"][start, 0]),
            int(feature["offsets"][end, 1]),
            predicted,
            lowercases(tokenizer),
        )

    @classmethod
    def answers(cls, pairs) -> dict[int, tuple]:
        """Example -> (score, answer text, gold answers, language): the best-scoring span over its features."""
        best: dict[int, tuple] = {}
        for (example, answers, lang), (score, text) in pairs:
            if example not in best or score > best[example][0]:
                best[example] = (score, text, answers, lang)
        return dict(sorted(best.items()))

    @classmethod
    def score(cls, pairs) -> dict[str, float]:
        """Each example's answer (``answers``); then EM and F1 over the examples."""
        chosen = list(cls.answers(pairs).values())
        langs = {lang for *_, lang in chosen}
        lang = langs.pop() if cls.per_language_scoring and len(langs) == 1 else None
        if cls.per_language_scoring and lang is None:
            raise ValueError(f"{cls.name}: one language per evaluation set, got {sorted(langs)}")
        return qa_scores([answers for _, _, answers, _ in chosen], [text for _, text, _, _ in chosen], lang)

    @classmethod
    def prediction_rows(cls, pairs) -> list[dict]:
        """One row per example: its gold answers and the answer chosen over its features."""
        return [
            {"id": example, "gold": answers, "predicted": text}
            for example, (_, text, answers, _) in cls.answers(pairs).items()
        ]


class XQuADTask(QATask):
    """XQuAD (Artetxe et al. 2020): 1,190 SQuAD v1.1 dev questions translated into 10 languages; test only."""

    name: ClassVar[str] = "xquad"
    hub_name: ClassVar[str] = "xquad"  # configs xquad.<lang>: ar de el en es hi ro ru th tr vi zh
    config_pattern: ClassVar[str] = "xquad.{lang}"
    test_split: ClassVar[str] = "validation"  # the Hub's only split


class MLQATask(QATask):
    """MLQA (Lewis et al. 2020): questions and contexts in 7 languages; XTREME scores context = question language,
    with MLQA's own evaluation (per-language articles and punctuation, Chinese split into characters)."""

    name: ClassVar[str] = "mlqa"
    hub_name: ClassVar[str] = "mlqa"  # configs mlqa.<context lang>.<question lang>; splits validation, test
    config_pattern: ClassVar[str] = "mlqa.{lang}.{lang}"
    per_language_scoring: ClassVar[bool] = True


class TyDiQATask(QATask):
    """TyDiQA-GoldP (Clark et al. 2020): the gold passage task, 9 languages in XTREME; its dev set is the test set.
    The Hub's ``secondary_task`` config holds every language, told apart by the id's prefix."""

    name: ClassVar[str] = "tydiqa"
    hub_name: ClassVar[str] = "tydiqa"
    config_pattern: ClassVar[str] = "secondary_task"
    test_split: ClassVar[str] = "validation"
    # XTREME's SRC=tydiqa (scripts/train_qa.sh): trained on TyDiQA-GoldP's English train set (the Hub's ``train``
    # split, its ``english-`` rows), its English dev set (= the English test set) as the source's dev set
    own_train_sets: ClassVar[tuple[str, ...]] = ("tydiqa",)
    id_prefixes: ClassVar[dict[str, str]] = {
        "ar": "arabic-",
        "bn": "bengali-",
        "en": "english-",
        "fi": "finnish-",
        "id": "indonesian-",
        "ja": "japanese-",
        "ko": "korean-",
        "ru": "russian-",
        "sw": "swahili-",
        "te": "telugu-",
        "th": "thai-",
    }
