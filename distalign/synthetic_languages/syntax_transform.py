"""T_syn, ALIGN-MLM's syntax transformation (Tang et al. 2022, §3 and Appendix F; Deshpande et al. 2022): a
sentence of the natural language re-ordered to another language's word order, one dependency tree at a time.

The paper uses Galactic Dependencies (Wang & Eisner 2016), which re-samples the order of the dependents of
every noun and verb from ordering models trained on the target language's treebank (French in the paper).
Here the target's preferences are, for a head and a dependent of one of the classes below, the
probability that the dependent goes after the head:

- counted in a treebank of the target language (a CoNLL-U file, e.g. UD French-GSD), the data Galactic
  Dependencies learns from, though it conditions each order on more than the two words' classes;
- or, with no treebank, from the target's word-order features in URIEL (lang2vec: WALS's values, k-NN
  predictions where WALS has none): p_after = after / (before + after), 0.5 where both or neither hold.

Each classed dependent's side is drawn once with a seeded generator. Every other dependent (determiners, auxiliaries,
punctuation, possessive pronouns, ...) keeps its side of the head. On each side, dependents keep their original
relative order; each dependent carries its whole subtree. English to French (``fra``): adjectives, nominal
possessors and relative clauses follow their noun ("my friend's dog" -> "dog my friend 's", as "le chien de mon
ami"), and the rest of English order stays (both are SVO, with prepositions);
to Japanese (``jpn``): objects and obliques precede the verb, adpositions follow their noun.

Input is Universal Dependencies CoNLL-U (``conllu``): any parser writes it (Stanza, spaCy + spacy-conll,
UDPipe). Multi-word token lines and empty nodes are skipped; the words are the syntactic words.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path

from distalign.errors import ConfigError, InputError
from distalign.typology import uriel_code, word_order_features

NOUN_HEADS = {"NOUN", "PROPN"}
VERB_HEADS = {"VERB"}

# (head kind, UD relation without its subtype or with it) -> URIEL feature stem: S_<stem> is before/after
DEPENDENT_CLASSES = {
    ("verb", "nsubj"): "SUBJECT_{}_VERB",
    ("verb", "obj"): "OBJECT_{}_VERB",
    ("verb", "obl"): "OBLIQUE_{}_VERB",
    ("noun", "amod"): "ADJECTIVE_{}_NOUN",
    ("noun", "nummod"): "NUMERAL_{}_NOUN",
    ("noun", "nmod"): "POSSESSOR_{}_NOUN",  # WALS 86A, the order of genitive and noun: "of"-phrases too
    ("noun", "nmod:poss"): "POSSESSOR_{}_NOUN",  # nominal possessors only: see POSSESSIVE_PRONOUNS
    ("noun", "acl:relcl"): "RELATIVE_{}_NOUN",
    ("noun", "case"): "ADPOSITION_{}_NOUN",  # adpositions only: the possessive 's is a `case` dependent too
}
# UD tags "my", "his", "their" nmod:poss like "John" in "John's", but WALS 86A orders genitives, not possessive
# pronouns, which French also puts before the noun ("mon ami"): they keep their side, as determiners do
POSSESSIVE_PRONOUNS = {"PRON", "DET"}


@dataclass(frozen=True)
class Word:
    index: int  # 1-based position in the sentence
    form: str
    upos: str
    head: int  # 0: the root
    deprel: str


def read_conllu(path: str | Path) -> list[list[Word]]:
    """The sentences of a CoNLL-U file as syntactic words; a malformed tree names its sentence."""
    import conllu

    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: file not found")
    sentences = []
    with path.open(encoding="utf-8") as handle:
        for number, tokens in enumerate(conllu.parse_incr(handle), start=1):
            words = [
                Word(t["id"], t["form"], t["upos"] or "", t["head"] if t["head"] is not None else -1, t["deprel"] or "")
                for t in tokens
                if isinstance(t["id"], int)
            ]
            unreached = _off_the_tree(words)
            if unreached:
                raise InputError(
                    f"{path}: sentence {number} is not a dependency tree with one root (words "
                    f"{unreached} are not reached from it; text: {tokens.metadata.get('text', '?')!r})"
                )
            sentences.append(words)
    return sentences


def _off_the_tree(words: list[Word]) -> list[int]:
    """The words not reached from a single root (heads outside the sentence, second roots, cycles); [0] if none."""
    roots = [w.index for w in words if w.head == 0]
    if len(roots) != 1:
        return [0] if not roots else roots[1:]
    reached, frontier = set(roots), roots
    while frontier:
        frontier = [w.index for w in words if w.head in frontier and w.index not in reached]
        reached.update(frontier)
    return [w.index for w in words if w.index not in reached]


def checked_target(target: str, key: str) -> str:
    """``target`` as ``after_probabilities`` reads it, checked before any work: a treebank (``.conllu``) that
    exists, or a language URIEL knows, as its ISO 639-3 code (``fr``, ``French`` -> ``fra``); errors name ``key``."""
    if target.endswith(".conllu"):
        if not Path(target).is_file():
            raise InputError(
                f"{key}: file not found: {target} (give a CoNLL-U treebank of the target language, or "
                "its language code)"
            )
        return target
    return uriel_code(target, where=key)


def after_probabilities(target: str) -> dict[str, float]:
    """Feature stem -> probability that such a dependent follows its head in the target: counted in a
    treebank of the target language (``target`` a ``.conllu`` file, as Galactic Dependencies learns its
    orders), else from the language's URIEL features (``target`` a language code; see ``uriel_probabilities``)."""
    if target.endswith(".conllu"):
        return treebank_probabilities(read_conllu(target))
    return uriel_probabilities(target)


def uriel_probabilities(lang: str) -> dict[str, float]:
    """WALS's observed word order (URIEL ``syntax_wals``), and URIEL's k-NN prediction (``syntax_knn``) where
    WALS has no value. The k-NN set is not used throughout: it also changes observed values (French adjectives:
    WALS after the noun, k-NN both orders)."""
    predicted = word_order_features(lang, "syntax_knn")
    try:
        observed = word_order_features(lang, "syntax_wals")
    except ConfigError:  # a language WALS does not cover
        observed = predicted
    probabilities = {}
    for stem in DEPENDENT_CLASSES.values():
        names = (f"S_{stem.format('BEFORE')}", f"S_{stem.format('AFTER')}")
        source = observed if not any(math.isnan(observed[name]) for name in names) else predicted
        before, after = (source[name] for name in names)
        probabilities[stem] = after / (before + after) if before + after > 0 else 0.5
    return probabilities


def treebank_probabilities(trees: list[list[Word]]) -> dict[str, float]:
    """The share of each class's dependents that follow their head in ``trees`` (0.5 for a class never seen)."""
    counts = {stem: [0, 0] for stem in DEPENDENT_CLASSES.values()}  # [before, after]
    for words in trees:
        by_index = {w.index: w for w in words}
        for word in words:
            stem = dependent_class(by_index[word.head], word) if word.head else None
            if stem is not None:
                counts[stem][word.index > word.head] += 1
    return {stem: after / (before + after) if before + after else 0.5 for stem, (before, after) in counts.items()}


def dependent_class(head: Word, dependent: Word) -> str | None:
    kind = "noun" if head.upos in NOUN_HEADS else "verb" if head.upos in VERB_HEADS else None
    if (
        kind is None
        or (dependent.deprel == "case" and dependent.upos != "ADP")
        or (dependent.deprel == "nmod:poss" and dependent.upos in POSSESSIVE_PRONOUNS)
    ):
        return None
    return DEPENDENT_CLASSES.get((kind, dependent.deprel)) or DEPENDENT_CLASSES.get(
        (kind, dependent.deprel.split(":")[0])
    )


def reorder(words: list[Word], p_after: dict[str, float], rng: random.Random) -> list[str]:
    """The sentence's word forms in the target's order (see the module docstring)."""
    return [word.form for word in reordered_words(words, p_after, rng)]


def reordered_words(words: list[Word], p_after: dict[str, float], rng: random.Random) -> list[Word]:
    """The sentence's words in the target's order, each with its tag (labelled data keeps its labels)."""
    children: dict[int, list[Word]] = {w.index: [] for w in words}
    children[0] = []
    for word in words:
        children[word.head].append(word)  # in sentence order

    def linear(head: Word) -> list[Word]:
        before: list[Word] = []
        after: list[Word] = []
        for dependent in children[head.index]:
            stem = dependent_class(head, dependent)
            goes_after = dependent.index > head.index if stem is None else rng.random() < p_after[stem]
            (after if goes_after else before).append(dependent)
        # each side in the original order of the dependents
        return [word for d in before for word in linear(d)] + [head] + [word for d in after for word in linear(d)]

    (root,) = children[0]
    return linear(root)


def syntax_transform(sentences: list[list[Word]], target: str, seed: int = 0) -> list[list[str]]:
    """Every sentence re-ordered towards the ``target``'s word order (a language code or a treebank of it,
    ``after_probabilities``); sentence i draws from its own seeded stream."""
    p_after = after_probabilities(target)
    return [reorder(words, p_after, random.Random(f"{seed}:{i}")) for i, words in enumerate(sentences)]
