"""A second language derived from a base corpus, after the controlled setting of ALIGN-MLM (Tang et al. 2022)
and Deshpande et al. (2022):

- ``translit``: every character mapped to its own letter of another script (Cyrillic, then CJK ideographs and
  Hangul syllables for corpora with more distinct characters), none in the base corpus, so the derived
  language shares no character, hence no subword, with the base (a disjoint copy of the vocabulary);
- ``translit_inv``: transliterated and each sentence's word order reversed, sentences delimited by
  periods within a line (a period stays at its sentence's end), as ALIGN-MLM's inversion;
- ``translit_perm``: transliterated and each sentence's words randomly shuffled (a fresh seeded
  permutation per sentence, so word order carries no signal at all);
- ``translit_syn``: transliterated and re-ordered to another language's syntax by the sentence's
  dependency parse (ALIGN-MLM's T_syn, ``distalign.synthetic_languages.syntax_transform``): needs a parsed base corpus.

The gold dictionary is exact: base word ``w`` translates to ``transliterate(w)``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass

TRANSFORMATIONS = ("translit", "translit_inv", "translit_perm", "translit_syn")
NEEDS_PARSE = {"translit_syn"}
# The derived alphabet, in order: Cyrillic + Cyrillic Supplement, CJK Unified Ideographs and Extension A, Hangul
# syllables (about 39,000 letters; a Wikipedia dump has thousands of distinct characters)
SCRIPT_BLOCKS = ((0x0400, 0x0530), (0x4E00, 0xA000), (0x3400, 0x4DC0), (0xAC00, 0xD7A4))
_TOKEN = re.compile(r"\w+|[^\w\s]")


def normalise(sentence: str) -> str:
    """Lower-cased, punctuation split off: words are whitespace-separated tokens."""
    return " ".join(_TOKEN.findall(sentence.lower()))


@dataclass(frozen=True)
class Transliteration:
    table: dict[str, str]
    # words the derived language keeps in the base spelling: shared vocabulary, as Deshpande et al. (2022) and
    # ALIGN-MLM's App. D vary it (``BenchSpec.shared_words``)
    kept: frozenset[str] = frozenset()

    @classmethod
    def for_text(cls, sentences: list[str]) -> Transliteration:
        chars = sorted({c for s in sentences for c in s if not c.isspace()})
        table = dict(zip(chars, derived_letters(set(chars))))
        if len(table) < len(chars):
            raise ValueError(
                f"the base corpus uses {len(chars)} distinct characters; transliteration supports "
                f"{len(table)} (use a smaller or cleaner corpus)"
            )
        return cls(table)

    def word(self, word: str) -> str:
        return word if word in self.kept else "".join(self.table[c] for c in word)

    def sentence(self, sentence: str) -> str:
        return " ".join(self.word(w) for w in sentence.split())


def derived_letters(base: set[str]) -> Iterator[str]:
    """The letters and digits of SCRIPT_BLOCKS not in the ``base`` alphabet, in order: whole characters only
    (Cyrillic's titlos are combining marks, its thousands sign a symbol), as a derived token spelt only in
    marks would not count as a word of the derived language (``synthetic.vocabulary_counterparts``). NFKC,
    which the tokenizer applies, leaves every one of them alone."""
    for start, end in SCRIPT_BLOCKS:
        yield from (c for c in map(chr, range(start, end)) if c.isalnum() and c not in base)


def invert_sentences(words: list[str], period: str | None) -> list[int]:
    """The positions of ``words`` with each period-delimited sentence reversed, its period (if any) kept last."""
    out: list[int] = []
    sentence: list[int] = []
    for i, word in enumerate(words):
        if word == period:
            out += sentence[::-1] + [i]
            sentence = []
        else:
            sentence.append(i)
    return out + sentence[::-1]


def word_order(words: list[str], transformation: str, rng: random.Random, period: str | None) -> list[int]:
    """Where each word of a transliterated sentence goes under the word-order part of ``transformation``:
    position i of the derived sentence holds ``words[order[i]]`` (labelled data moves its labels the same way).
    ``translit_syn`` re-orders by parses, before transliteration (``syntax_transform``): the identity here."""
    order = list(range(len(words)))
    if transformation == "translit_inv":
        order = invert_sentences(words, period)
    elif transformation == "translit_perm":
        rng.shuffle(order)
    return order


def derive(
    sentences: list[str],
    transformation: str,
    translit: Transliteration,
    seed: int = 0,
    reordered: list[str] | None = None,
) -> list[str]:
    """The derived-language corpus, sentence i translating base sentence i. ``translit_syn`` takes the
    sentences already re-ordered by their parses (``reordered``, in the same order)."""
    if transformation not in TRANSFORMATIONS:
        raise ValueError(f"unknown transformation {transformation!r}; choose from {', '.join(TRANSFORMATIONS)}")
    if transformation in NEEDS_PARSE:
        if reordered is None or len(reordered) != len(sentences):
            raise ValueError(f"{transformation} needs every sentence re-ordered by its dependency parse")
        sentences = reordered
    rng = random.Random(seed)
    out = []
    for sentence in sentences:
        words = translit.sentence(sentence).split()
        out.append(" ".join(words[i] for i in word_order(words, transformation, rng, translit.table.get("."))))
    return out
