"""The base language's labelled transfer data carried into the derived language, as ALIGN-MLM builds its
fine-tuning sets (App. G.1: "we perform the desired transformation on the input sentences, as well as any
other corresponding labels"):

- POS tagging (``udpos``): every word transliterated and moved where the transformation moves it, its tag
  with it; under ``translit_syn`` re-ordered by its dependency tree, as the corpus is (the CoNLL-U file must
  carry heads and relations);
- sentence-pair tasks (``pawsx``, ``xnli``): both sentences transformed, the label kept. Under
  ``translit_syn`` the sentences would need parses: an error.

The examples are read with ``distalign transfer``'s own readers (``distalign.transfer.data``) and written
back, the base language's unchanged and the derived language's transformed, as
``<out>/<task>/<lang>/{train,dev,test}.{conllu,tsv}``: the layout ``distalign transfer`` reads.
NER is left out: its B-/I- tags would need repairing after inversion (the paper does), which is not done.
"""

from __future__ import annotations

import random
from pathlib import Path

from distalign.errors import InputError
from distalign.synthetic_languages.derived_language import NEEDS_PARSE, Transliteration, word_order
from distalign.synthetic_languages.syntax_transform import Word, after_probabilities, read_conllu, reordered_words
from distalign.transfer.data import read_split
from distalign.transfer.tasks.base import TransferTask
from distalign.transfer.tasks.pair import PairExample, SentencePairTask
from distalign.transfer.tasks.registry import TRANSFER_TASKS
from distalign.transfer.tasks.tagging import TaggedSentence, UDPOSTask

SPLITS = {"train": "train", "validation": "dev", "test": "test"}  # read_split's name -> the file written
SUPPORTED = tuple(name for name, task in TRANSFER_TASKS.items() if issubclass(task, (SentencePairTask, UDPOSTask)))


def check_tasks(tasks: tuple[str, ...], transformations: tuple[str, ...]) -> None:
    unknown = [name for name in tasks if name not in SUPPORTED]
    if unknown:
        raise InputError(
            f"--transfer-tasks {','.join(unknown)}: the bench carries {', '.join(SUPPORTED)} into the "
            "derived language (NER's B-/I- tags would need repairing after inversion)"
        )
    pairs = [name for name in tasks if issubclass(TRANSFER_TASKS[name], SentencePairTask)]
    if pairs and NEEDS_PARSE & set(transformations):
        raise InputError(
            f"--transfer-tasks {','.join(pairs)} with translit_syn: the pairs' sentences have no "
            "dependency parses to re-order; run translit_syn with --transfer-tasks udpos (parsed CoNLL-U)"
        )


def read_examples(data_dir: str, lang: str, tasks: tuple[str, ...]) -> dict[tuple[str, str], list]:
    """(task, split) -> the base language's examples, read and checked by ``distalign transfer``'s readers."""
    return {
        (name, split): read_split(TRANSFER_TASKS[name], data_dir, lang, split)[0] for name in tasks for split in SPLITS
    }


def example_texts(examples: dict[tuple[str, str], list]) -> list[str]:
    """Every sentence of the examples (the transliteration must cover their characters)."""
    texts = []
    for items in examples.values():
        for e in items:
            texts += [e.first, e.second] if isinstance(e, PairExample) else [" ".join(e.words)]
    return texts


def transform_tagged(
    words: list[str], tags: list, transformation: str, translit: Transliteration, rng: random.Random
) -> tuple[list[str], list]:
    """A tagged sentence in the derived language: words transliterated and re-ordered, each tag moved with its word."""
    derived = [translit.word(w) for w in words]
    order = word_order(derived, transformation, rng, translit.table.get("."))
    return [derived[i] for i in order], [tags[i] for i in order]


def transform_sentence(sentence: str, transformation: str, translit: Transliteration, rng: random.Random) -> str:
    words, _ = transform_tagged(sentence.split(), [None] * len(sentence.split()), transformation, translit, rng)
    return " ".join(words)


def conllu_text(sentences: list[tuple[list[str], list[str]]]) -> str:
    """(words, UPOS tags) per sentence as CoNLL-U without trees."""
    blocks = [
        "\n".join(f"{i}\t{w}\t_\t{t}\t_\t_\t_\t_\t_\t_" for i, (w, t) in enumerate(zip(words, tags), 1))
        for words, tags in sentences
    ]
    return "\n\n".join(blocks) + "\n\n"


def pairs_text(task: type[TransferTask], examples: list[PairExample]) -> str:
    lines = ["sentence1\tsentence2\tlabel"] + [f"{e.first}\t{e.second}\t{task.labels[e.label]}" for e in examples]
    return "\n".join(lines) + "\n"


def syntax_trees(data_dir: str, name: str, lang: str, split: str) -> list[list[Word]]:
    path = Path(data_dir) / name / lang / f"{SPLITS[split]}.conllu"
    try:
        return read_conllu(path)
    except InputError as error:
        raise InputError(f"translit_syn re-orders {name} by its dependency trees: {error}") from None


def write_derived_tasks(
    examples: dict[tuple[str, str], list],
    data_dir: str,
    lang: str,
    transformation: str,
    translit: Transliteration,
    seed: int,
    out: Path,
    base: str,
    derived: str,
    syntax_target: str = "fra",
) -> Path:
    """``out/<task>/{base,derived}/<split>.<suffix>``: the examples as they are, and transformed; returns ``out``."""
    p_after = after_probabilities(syntax_target) if transformation in NEEDS_PARSE else None
    for (name, split), items in examples.items():
        task = TRANSFER_TASKS[name]
        rng = random.Random(f"{seed}:{name}:{split}")  # translit_perm: a fresh permutation per sentence
        if issubclass(task, SentencePairTask):
            texts = {
                base: pairs_text(task, items),
                derived: pairs_text(
                    task,
                    [
                        PairExample(
                            transform_sentence(e.first, transformation, translit, rng),
                            transform_sentence(e.second, transformation, translit, rng),
                            e.label,
                        )
                        for e in items
                    ],
                ),
            }
        elif p_after is not None:  # the parsed file itself: read_split keeps no trees
            trees = syntax_trees(data_dir, name, lang, split)
            reordered = [
                reordered_words(t, p_after, random.Random(f"{seed}:{name}:{split}:{i}")) for i, t in enumerate(trees)
            ]
            texts = {
                base: conllu_text([([w.form for w in t], [w.upos for w in t]) for t in trees]),
                derived: conllu_text([([translit.word(w.form) for w in t], [w.upos for w in t]) for t in reordered]),
            }
        else:
            sentences: list[TaggedSentence] = items
            tagged = [(list(s.words), [task.labels[t] for t in s.tags]) for s in sentences]
            texts = {
                base: conllu_text(tagged),
                derived: conllu_text([transform_tagged(w, t, transformation, translit, rng) for w, t in tagged]),
            }
        for language, text in texts.items():
            folder = out / name / language
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{SPLITS[split]}.{task.file_suffix}").write_text(text, encoding="utf-8")
    return out
