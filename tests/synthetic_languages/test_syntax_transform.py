"""T_syn (ALIGN-MLM's syntax transformation) on hand-written dependency trees: the target's word order from
URIEL, subtrees moved whole, sampling shares, and malformed trees named."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from distalign.errors import InputError
from distalign.synthetic_languages.syntax_transform import after_probabilities, read_conllu, reorder, syntax_transform


def conllu(*sentences: list[tuple]) -> str:
    """CoNLL-U text of sentences given as (form, upos, head, deprel) rows."""
    blocks = []
    for words in sentences:
        lines = [f"# text = {' '.join(w[0] for w in words)}"]
        lines += [
            f"{i}\t{form}\t_\t{upos}\t_\t_\t{head}\t{rel}\t_\t_"
            for i, (form, upos, head, rel) in enumerate(words, start=1)
        ]
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks) + "\n"


SARA = [
    ("Sara", "PROPN", 2, "nsubj"),
    ("ate", "VERB", 0, "root"),
    ("apples", "NOUN", 2, "obj"),
    (".", "PUNCT", 2, "punct"),
]
# "the very big dog of my friend barked": an adjective with its own dependent, a possessor inside a nominal modifier
DOG = [
    ("the", "DET", 4, "det"),
    ("very", "ADV", 3, "advmod"),
    ("big", "ADJ", 4, "amod"),
    ("dog", "NOUN", 8, "nsubj"),
    ("of", "ADP", 7, "case"),
    ("my", "PRON", 7, "nmod:poss"),
    ("friend", "NOUN", 4, "nmod"),
    ("barked", "VERB", 0, "root"),
]


@pytest.fixture
def trees(tmp_path):
    path = tmp_path / "parsed.conllu"
    path.write_text(conllu(SARA, DOG), encoding="utf-8")
    return read_conllu(path)


def test_uriel_word_order_gives_the_target_preferences():
    fra, jpn, eng = after_probabilities("fra"), after_probabilities("jpn"), after_probabilities("eng")
    assert fra["ADJECTIVE_{}_NOUN"] == 1.0 and eng["ADJECTIVE_{}_NOUN"] == 0.0  # French: une table ronde
    assert fra["OBJECT_{}_VERB"] == 1.0 and jpn["OBJECT_{}_VERB"] == 0.0  # Japanese is SOV
    assert fra["SUBJECT_{}_VERB"] == 0.0
    assert eng["POSSESSOR_{}_NOUN"] == 0.5  # WALS: English has both orders (John's book, the book of John)


def test_orders_counted_in_a_target_treebank(tmp_path):
    # a "treebank": adjectives after their noun in 3 of 4 cases, objects always before the verb

    def rows(adjective_after):
        if adjective_after:
            return [
                ("x", "NOUN", 3, "nsubj"),
                ("y", "NOUN", 3, "obj"),
                ("v", "VERB", 0, "root"),
                ("z", "ADJ", 1, "amod"),
            ]
        return [("z", "ADJ", 2, "amod"), ("x", "NOUN", 3, "nsubj"), ("v", "VERB", 0, "root")]

    path = tmp_path / "target.conllu"
    path.write_text(conllu(rows(True), rows(True), rows(True), rows(False)), encoding="utf-8")
    p_after = after_probabilities(str(path))
    assert p_after["ADJECTIVE_{}_NOUN"] == 0.75 and p_after["OBJECT_{}_VERB"] == 0.0
    assert p_after["SUBJECT_{}_VERB"] == 0.0 and p_after["RELATIVE_{}_NOUN"] == 0.5  # never seen: no preference
    assert syntax_transform([read_conllu(path)[0]], str(path))[0] == ["x", "z", "y", "v"]


def test_french_moves_adjectives_after_their_noun_with_their_subtree(trees):
    sara, dog = syntax_transform(trees, "fra", seed=0)
    assert sara == ["Sara", "ate", "apples", "."]  # SVO stays SVO
    # adjective (with "very") after the noun, the "of"-phrase too; the possessive pronoun stays first, as "mon ami"
    assert dog == ["the", "dog", "very", "big", "of", "my", "friend", "barked"]


@pytest.mark.parametrize("upos", ["PRON", "DET"])  # parsers tag "my" either way
def test_possessive_pronouns_keep_their_side_and_nominal_possessors_follow_the_genitive_order(tmp_path, upos):
    # "my friend 's dog barked": "friend" (with its 's) a nominal possessor of "dog", "my" a pronominal one of "friend"
    path = tmp_path / "poss.conllu"
    path.write_text(
        conllu(
            [
                ("my", upos, 2, "nmod:poss"),
                ("friend", "NOUN", 4, "nmod:poss"),
                ("'s", "PART", 2, "case"),
                ("dog", "NOUN", 5, "nsubj"),
                ("barked", "VERB", 0, "root"),
            ]
        ),
        encoding="utf-8",
    )
    [words] = read_conllu(path)
    assert syntax_transform([words], "fra")[0] == ["dog", "my", "friend", "'s", "barked"]  # le chien de mon ami
    english = {tuple(reorder(words, after_probabilities("eng"), random.Random(i))) for i in range(50)}
    assert english == {("my", "friend", "'s", "dog", "barked"), ("dog", "my", "friend", "'s", "barked")}


def test_japanese_order_puts_the_object_before_the_verb(trees):
    sara, dog = syntax_transform(trees, "jpn", seed=0)
    assert sara == ["Sara", "apples", "ate", "."]  # ALIGN-MLM's Table 9: SVO -> SOV; punctuation keeps its side
    # genitives precede their noun, postpositions follow theirs; "the" keeps its side
    assert dog == ["the", "very", "big", "my", "friend", "of", "dog", "barked"]


def test_each_dependent_follows_its_head_with_the_target_probability(trees):
    sara = trees[0]
    p_after = {"SUBJECT_{}_VERB": 0.0, "OBJECT_{}_VERB": 0.3, "OBLIQUE_{}_VERB": 0.5}
    orders = Counter(tuple(reorder(sara, p_after, random.Random(i))) for i in range(4000))
    assert set(orders) == {("Sara", "ate", "apples", "."), ("Sara", "apples", "ate", ".")}
    assert orders[("Sara", "ate", "apples", ".")] / 4000 == pytest.approx(0.3, abs=0.03)


def test_each_sentence_draws_its_own_order_from_the_seed(trees):
    # English has both genitive orders (p_after 0.5): the "of"-phrase after "dog" or before it
    dogs = [trees[1]] * 40
    orders = [tuple(words) for words in syntax_transform(dogs, "eng", seed=5)]
    assert len(set(orders)) == 2  # copies of one sentence drawn independently, not all alike
    assert syntax_transform(dogs, "eng", seed=5) == [list(o) for o in orders]  # the seed reproduces them
    assert [tuple(words) for words in syntax_transform(dogs, "eng", seed=6)] != orders  # another seed differs


def test_multiword_tokens_are_read_as_their_syntactic_words(tmp_path):
    path = tmp_path / "mwt.conllu"
    path.write_text(
        "# text = I don't know\n1\tI\t_\tPRON\t_\t_\t4\tnsubj\t_\t_\n2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n"
        "2\tdo\t_\tAUX\t_\t_\t4\taux\t_\t_\n3\tn't\t_\tPART\t_\t_\t4\tadvmod\t_\t_\n"
        "4\tknow\t_\tVERB\t_\t_\t0\troot\t_\t_\n\n",
        encoding="utf-8",
    )
    [words] = read_conllu(path)
    assert [w.form for w in words] == ["I", "do", "n't", "know"]
    assert reorder(words, after_probabilities("fra"), random.Random(0)) == ["I", "do", "n't", "know"]


@pytest.mark.parametrize(
    "rows, problem",
    [
        ([("a", "NOUN", 0, "root"), ("b", "NOUN", 0, "root")], "two roots"),
        ([("a", "NOUN", 0, "root"), ("b", "NOUN", 7, "nmod")], "a head outside the sentence"),
        ([("a", "NOUN", 0, "root"), ("b", "NOUN", 3, "nmod"), ("c", "NOUN", 2, "nmod")], "a cycle"),
    ],
)
def test_a_malformed_tree_is_named(tmp_path, rows, problem):
    path = tmp_path / "bad.conllu"
    path.write_text(conllu(SARA, rows), encoding="utf-8")
    with pytest.raises(InputError, match=r"bad\.conllu: sentence 2 is not a dependency tree"):
        read_conllu(path)
