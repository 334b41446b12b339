"""What a bilingual dictionary's own name and words say about the language pair it is declared for.

A dictionary declared ``de-en`` that is an en->de file trains on its test words and scores the wrong direction
without a word; these checks make the declaration and the file agree before anything is read further:

- ``header_row``: a first line such as ``source<TAB>target`` or ``en<TAB>de`` names the columns, it is no pair;
- ``check_name``: a name ending in the pair (G-BLI ``yacle.test.freq.2k.en-de.tsv``, PanLex ``en-de.test...``)
  must name the declared pair, in the declared order;
- ``check_scripts``: each column's words must be mostly in the writing system of its declared language (a ru-en
  file declared en-ru fails here; two languages of one script pass, which is why the name is checked too);
- ``lower_cased``: every word lower case, which a cased model meets in a form it rarely saw (callers name it).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from pathlib import Path

from distalign.errors import ConfigError, InputError
from distalign.languages import is_synthetic, language_code

HEADER_WORDS = {
    "source",
    "target",
    "src",
    "tgt",
    "word",
    "words",
    "translation",
    "word1",
    "word2",
    "lang1",
    "lang2",
    "source_word",
    "target_word",
    "term",
    "source word",
    "target word",
}
# a pair at the end of a file's name (before its extension) or at its start (PanLex: en-de.test.2000.cc.trans)
PAIR_IN_NAME = re.compile(r"(?:^|[._])([A-Za-z]{2,3})-([A-Za-z]{2,3})(?=[._]|$)")
# ISO 15924 scripts whose letters' Unicode names do not start with the script's English name
UNICODE_NAMES = {
    "Hans": ("CJK",),
    "Hant": ("CJK",),
    "Hani": ("CJK",),
    "Jpan": ("CJK", "HIRAGANA", "KATAKANA"),
    "Kore": ("HANGUL", "CJK"),
    "Beng": ("BENGALI",),
    "Orya": ("ORIYA",),
}
SAMPLE = 2000  # words per column the script check reads (a training dictionary may have millions)


def _code(text: str) -> str | None:
    try:
        return language_code(text, "")
    except ConfigError:
        return None


def header_row(fields: list[str], lang1: str, lang2: str) -> bool:
    """Whether a first line's two fields name the columns (``source``/``target``, or the two languages)."""
    words = [f.strip().lower() for f in fields]
    if all(w in HEADER_WORDS for w in words):
        return True
    return lang1 != lang2 and sorted(_code(w) or "" for w in words) == sorted((lang1, lang2))


def check_name(path: Path, lang1: str, lang2: str) -> None:
    """An ``InputError`` when the pair in ``path``'s name is not the declared ``lang1-lang2``."""
    for match in PAIR_IN_NAME.finditer(path.name):
        named = [_code(code) for code in match.groups()]
        if None in named or named == [lang1, lang2]:
            continue
        how = (
            "the other way round (the source language comes first)"
            if named == [lang2, lang1]
            else f"for {named[0]}-{named[1]}"
        )
        raise InputError(
            f"{path}: declared {lang1}-{lang2} (lang1-lang2), but its name says it is "
            f"{match.group(1)}-{match.group(2)}: the declaration is {how}; declare lang1: {named[0]}, "
            f"lang2: {named[1]}, or rename the file if its name is wrong"
        )


def _expected_script(lang: str) -> tuple[str, tuple[str, ...]] | None:
    """(script name, the prefixes of its letters' Unicode names) of a language; None when unknown (a synthetic
    language, a code langcodes cannot place)."""
    import langcodes

    if is_synthetic(lang):  # langcodes would guess one
        return None
    try:
        script = langcodes.Language.get(lang).maximize().script
    except (ValueError, LookupError):
        return None
    if not script:
        return None
    name = langcodes.Language.get(f"und-{script}").script_name()
    return name, UNICODE_NAMES.get(script, (name.upper(),))


def _script(word: str) -> str | None:
    """The first word of the Unicode name of ``word``'s first letter (LATIN, CYRILLIC, CJK, ...)."""
    letter = next((c for c in word if c.isalpha()), None)
    return unicodedata.name(letter, "").split(" ")[0] or None if letter else None


def _column_script(words: list[str]) -> tuple[str, float] | None:
    counts = Counter(s for s in map(_script, words[:SAMPLE]) if s)
    if not counts:
        return None
    script, n = counts.most_common(1)[0]
    return script, n / sum(counts.values())


def check_scripts(path: Path, lang1: str, lang2: str, words1: list[str], words2: list[str]) -> None:
    """An ``InputError`` when a column's words are mostly in another writing system than its declared language's."""
    expected = {lang: _expected_script(lang) for lang in (lang1, lang2)}
    for column, (lang, words) in enumerate(((lang1, words1), (lang2, words2)), start=1):
        found, want = _column_script(words), expected[lang]
        if found is None or want is None or found[0] in want[1] or found[1] < 0.5:
            continue
        other = lang2 if lang == lang1 else lang1
        other_script = expected[other]
        hint = (
            f"; they look like {other}'s: the pair may be declared the wrong way round"
            if other_script is not None and found[0] in other_script[1]
            else ""
        )
        raise InputError(
            f"{path}: declared {lang1}-{lang2}, but {found[1]:.0%} of the words of column {column} "
            f"(lang{column}: {lang}) are in {found[0].title()} letters, not {want[0]} ({lang}'s "
            f"script){hint}: check lang1 and lang2"
        )


def lower_cased(words: list[str]) -> bool:
    """Whether words with cased letters are there and every one of them is lower case."""
    cased = [w for w in words if w.lower() != w.upper()]
    return bool(cased) and all(w == w.lower() for w in cased)


def cased_tokenizer(model_path: str) -> bool:
    """Whether the model's tokenizer tells "Haus" from "haus" (XLM-R, cased mBERT; not uncased BERT)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    return tokenizer.tokenize("Haus Berlin") != tokenizer.tokenize("haus berlin")


def casing_note(model_path: str, dictionaries: list[tuple[str, str, list[str]]]) -> str | None:
    """A line naming the test dictionaries ((lang1, lang2, their words)) that are all lower case when the model's
    tokenizer is cased: the model meets "berlin" and German "haus" in a form it rarely saw, and the scores differ
    from those of the same dictionary cased. None when there is none. Synthetic languages, lower case by
    construction, are left out."""
    lowered = [
        f"{lang1}-{lang2}"
        for lang1, lang2, words in dictionaries
        if (_expected_script(lang1) or _expected_script(lang2)) and lower_cased(words)
    ]
    if not lowered or not cased_tokenizer(model_path):
        return None
    return (
        f"the test dictionaries {', '.join(lowered)} are all lower case and the tokenizer of {model_path} is "
        "cased: their words are encoded lower-cased as written (names and German nouns in a form the model "
        "rarely saw), so the BLI scores differ from those of a cased dictionary; give cased dictionaries to "
        "score words as the model saw them"
    )


def corpus_words(texts_by_lang: dict[str, list[str]]) -> dict[str, set[str]]:
    """Each language's lower-cased words in a sample of its corpus sentences (whitespace tokens, punctuation off)."""
    return {
        lang: {word.strip(".,;:!?\"'()[]«»„“”").lower() for text in texts for word in text.split()}
        for lang, texts in texts_by_lang.items()
    }


def check_against_corpora(
    label: str,
    lang1: str,
    lang2: str,
    words1: list[str],
    words2: list[str],
    words_by_lang: dict[str, set[str]],
    what: str = "corpus",
) -> None:
    """An ``InputError`` when a column's words are clearly those of another language's corpus than its declared
    language's: a pair declared the wrong way round, or for a language it is not in. Clearly, for the corpus where
    the most of them are (at least 3): twice their share in their own language's corpus, and twice the other
    column's share there (three times when their language has no corpus to compare with: a language evaluated
    zero-shot matches no corpus much better than another language's words do). ``what``: the word sets' name."""

    def matches(words: list[str], lang: str) -> tuple[int, float]:
        vocabulary = words_by_lang.get(lang) or set()
        sample = list(dict.fromkeys(w.lower() for w in words[:SAMPLE]))
        found = sum(w in vocabulary for w in sample)
        return found, found / len(sample) if sample else 0.0

    columns = ((lang1, words1, words2), (lang2, words2, words1))
    for column, (lang, words, other_words) in enumerate(columns, start=1):
        found, best = max(
            ((matches(words, other), other) for other in words_by_lang if other != lang), default=((0, 0.0), None)
        )
        if best is None or found[0] < 3:
            continue
        own, baseline = matches(words, lang)[1], matches(other_words, best)[1]
        has_corpus = lang in words_by_lang
        if found[1] < 2 * own or found[1] < (2 if has_corpus else 3) * baseline:
            continue
        swapped = " (the pair may be declared the wrong way round)" if best == (lang2 if column == 1 else lang1) else ""
        has = f"{own:.0%} in the {lang} {what}" if has_corpus else f"no {lang} {what} to compare with"
        raise InputError(
            f"{label}: declared {lang1}-{lang2}, but {found[1]:.0%} of the words of column {column} "
            f"(lang{column}: {lang}) are words of the {best} {what} ({has}; {baseline:.0%} of column "
            f"{3 - column}'s){swapped}: check lang1 and lang2"
        )
