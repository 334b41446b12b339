"""distalign bench synthetic: derived languages, dictionary split, per-run configs (no training here)."""

import random
import unicodedata
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from distalign.data.readers import read_parallel_files
from distalign.errors import ConfigError, InputError
from distalign.eval.alignment import vocabulary_alignment
from distalign.models.loading import SPECIALS
from distalign.synthetic_languages.benchmark import (
    BenchSpec,
    base_corpus,
    base_sentences,
    prepare_bench,
    run_bench,
    split_dictionary,
    training_config,
    vocabulary_counterparts,
    write_language_pair,
)
from distalign.synthetic_languages.derived_language import Transliteration, derive, derived_letters, normalise

SENTENCES = [normalise(s) for s in ["Tom is here.", "I saw Mary's cat!", "The cat is here, Tom.", "Ça va?"]]


def test_normalise_lowercases_and_splits_punctuation():
    assert SENTENCES[:2] == ["tom is here .", "i saw mary ' s cat !"]


def test_transliteration_is_a_disjoint_injective_copy():
    translit = Transliteration.for_text(SENTENCES)
    words = {w for s in SENTENCES for w in s.split()}
    copies = {translit.word(w) for w in words}
    assert len(copies) == len(words)  # injective
    assert not {c for w in words for c in w} & {c for w in copies for c in w}  # no shared character
    assert all("\u0400" <= c <= "\u052f" for w in copies for c in w)  # a small alphabet: Cyrillic


def large_alphabet(n: int) -> list[str]:
    """``n`` distinct lower-case letters and digits, as normalise leaves them: Latin, Greek, CJK ideographs, then
    Cyrillic (which the derived alphabet starts with: 400 take some of it, 200 none)."""
    chars = map(chr, [*range(0x30, 0x7B), *range(0x0370, 0x0400), *range(0x4E00, 0x4F00), *range(0x0400, 0x0530)])
    return [c for c in chars if c.isalnum() and c.lower() == c and unicodedata.normalize("NFKC", c) == c][:n]


@pytest.mark.parametrize("n", [200, 400])  # Cyrillic's combining marks came after 130 characters, a refusal after 304
def test_a_large_alphabet_is_transliterated_to_whole_letters_of_other_scripts(n):
    alphabet = large_alphabet(n)
    translit = Transliteration.for_text([" ".join(alphabet)])
    derived = [translit.word(c) for c in alphabet]
    assert len(alphabet) == n and len(set(derived)) == n and not set(derived) & set(alphabet)
    assert all(len(d) == 1 and d.isalnum() and unicodedata.normalize("NFKC", d) == d for d in derived)
    inverse = {d: c for c, d in translit.table.items()}
    assert "".join(inverse[d] for d in translit.word("".join(alphabet))) == "".join(alphabet)
    taken = "".join(derived_letters(set()))  # every letter of the derived alphabet taken by the base
    with pytest.raises(ValueError, match=f"uses {len(taken)} distinct characters; transliteration supports 0 "):
        Transliteration.for_text([taken])


def test_every_derived_twin_of_a_large_alphabet_is_an_alignment_candidate():
    """Through a tokenizer trained as the bench's tiny model's: a derived token spelt only in non-letters was
    no candidate while its base twin was paired, and the alignment score refused the pairs."""
    from tokenizers import SentencePieceUnigramTokenizer

    alphabet, rng = large_alphabet(200), random.Random(0)
    words = ["".join(rng.choices(alphabet, k=rng.randint(1, 3))) for _ in range(1000)]
    sentences = [" ".join(alphabet[i : i + 10]) for i in range(0, len(alphabet), 10)]
    sentences += [" ".join(rng.choices(words, k=8)) for _ in range(300)]
    translit = Transliteration.for_text(sentences)
    tokenizer = SentencePieceUnigramTokenizer()
    tokenizer.train_from_iterator(
        sentences + derive(sentences, "translit", translit),
        vocab_size=2000,
        special_tokens=SPECIALS,
        unk_token="<unk>",
        show_progress=False,
    )
    vocab = tokenizer.get_vocab()
    src, tgt, candidates, _ = vocabulary_counterparts(vocab, translit)
    assert len(src) >= len(alphabet) and set(tgt) <= set(candidates)
    score = vocabulary_alignment(torch.randn(len(vocab), 8), src, tgt, candidates)
    assert 0 <= score <= 100


def test_transformations_keep_words_and_change_order_as_named():
    translit = Transliteration.for_text(SENTENCES)
    plain = derive(SENTENCES, "translit", translit)
    assert plain[0] == " ".join(translit.word(w) for w in ["tom", "is", "here", "."])
    # inversion per period-delimited sentence, the period kept at its end (ALIGN-MLM's T_inv)
    assert derive(SENTENCES, "translit_inv", translit)[0] == translit.sentence("here is tom .")
    two = Transliteration.for_text(["a b . c d e . f"])
    assert derive(["a b . c d e . f"], "translit_inv", two) == [two.sentence("b a . e d c . f")]
    many = [" ".join(str(i) for i in range(12))] * 20
    translit = Transliteration.for_text(many)
    permuted = derive(many, "translit_perm", translit, seed=3)
    assert all(sorted(p.split()) == sorted(translit.sentence(many[0]).split()) for p in permuted)
    assert len(set(permuted)) > 1  # a fresh permutation per sentence
    assert permuted == derive(many, "translit_perm", translit, seed=3)
    with pytest.raises(ValueError, match="unknown transformation"):
        derive(SENTENCES, "syntax", translit)


def corpus(tmp_path, n=400):
    rng = random.Random(0)
    words = [f"w{chr(97 + i)}{chr(97 + j)}" for i in range(8) for j in range(8)]
    path = tmp_path / "base.txt"
    path.write_text("\n".join(" ".join(rng.choices(words, k=6)) for _ in range(n)) + "\n")
    return path


def test_dictionary_split_and_files(tmp_path):
    spec = BenchSpec(corpus=str(corpus(tmp_path)), dictionary_share=0.5, eval_words=10, min_count=3)
    sentences = base_sentences(spec)
    assert len(sentences) == len(set(sentences)) <= 400
    train, held_out = split_dictionary(sentences, spec)
    assert len(train) + len(held_out) == 32 and len(held_out) == 10 and not set(train) & set(held_out)
    translit = Transliteration.for_text(sentences)
    paths = write_language_pair(tmp_path / "pair", "translit_inv", sentences, translit, train, held_out, 0)
    eval_lines = paths["eval_dict"].read_text().splitlines()
    assert eval_lines == [f"{w}\t{translit.word(w)}" for w in held_out]
    base, derived = (paths[k].read_text().splitlines() for k in ("base", "derived"))
    assert [d.split() for d in derived] == [translit.sentence(b).split()[::-1] for b in base]

    config = training_config(spec, "translit_inv", "align", paths, tmp_path / "out", "parent123")
    assert (config.objectives.mlm.weight, config.objectives.align.weight, config.objectives.lexical.weight) == (
        1,
        10,
        0,
    )
    assert [c.lang for c in config.data.corpora] == ["en", "xx"]
    assert Path(config.data.eval_dictionaries[0].path) == paths["eval_dict"]
    assert config.run.name == "bench-translit_inv-align" and config.tracking.parent_run_id == "parent123"

    # XLM: MLM + TLM on the base/derived twins, a quarter as many pairs as corpus sentences a step
    xlm = training_config(spec, "translit_inv", "xlm", paths, tmp_path / "out")
    assert (xlm.objectives.mlm.weight, xlm.objectives.tlm.weight, xlm.objectives.align.weight) == (1, 1, 0)
    assert xlm.train.parallel_batch_size * 4 == xlm.train.corpus_batch_size
    source = xlm.data.parallel[0]
    pairs, report = read_parallel_files(source.path1, source.path2, source.lang1, source.lang2)
    assert report.malformed == 0 and pairs["text1"].to_pylist() == base and pairs["text2"].to_pylist() == derived

    # DICT-MLM as ALIGN-MLM ran it (App. G.4): replaces MLM; DICT-MLM-50, every word maskable, no conditioned head
    dict_mlm = training_config(spec, "translit_inv", "dict_mlm", paths, tmp_path / "out")
    assert (dict_mlm.objectives.mlm.weight, dict_mlm.objectives.dict_mlm.weight) == (0, 1)
    settings = dict_mlm.objectives.dict_mlm
    assert (settings.synonym_label_percent, settings.mask_words, settings.conditioned_head, settings.mask_prob) == (
        50,
        "all",
        False,
        0.15,
    )
    assert Path(dict_mlm.data.dictionaries[0].path) == paths["train_dict"]

    with pytest.raises(InputError, match="not more than the 40 held out"):
        split_dictionary(sentences, BenchSpec(eval_words=40))
    with pytest.raises(InputError, match="file not found"):
        base_sentences(BenchSpec(corpus=str(tmp_path / "missing.txt")))


def test_vocabulary_counterparts_pair_each_base_token_with_its_transliteration():
    translit = Transliteration.for_text(["ab c"])
    t = translit.word
    vocab = {"<s>": 0, "▁ab": 1, "c": 2, "▁": 3, f"▁{t('ab')}": 4, t("c"): 5, "b": 6, f"{t('b')}{t('c')}": 7}
    src, tgt, candidates, unpaired = vocabulary_counterparts(vocab, translit)
    assert sorted(zip(src, tgt)) == [(1, 4), (2, 5)]  # "b" has no transliterated twin in the vocabulary
    assert unpaired == 1
    assert sorted(candidates) == [4, 5, 7]  # the derived vocabulary: specials and the bare marker excluded
    # a special token spelt in the base letters is neither a base token nor unpaired
    assert vocabulary_counterparts(vocab | {"<abc>": 8}, translit)[3] == 2
    assert vocabulary_counterparts(vocab | {"<abc>": 8}, translit, specials=["<abc>"])[3] == 1


def test_the_dictionary_is_a_share_of_the_whole_vocabulary(tmp_path):
    """ALIGN-MLM sizes its dictionary as 25% of the natural language's vocabulary: rare words count in the
    vocabulary but never become entries."""
    path = corpus(tmp_path)
    path.write_text(path.read_text() + "".join(f"rare{chr(97 + i)}{chr(97 + j)}\n" for i in range(8) for j in range(8)))
    spec = BenchSpec(corpus=str(path), eval_words=10, min_count=3)  # the default share: 0.25
    train, held_out = split_dictionary(base_sentences(spec), spec)
    assert len(train) + len(held_out) == 32  # 25% of 64 frequent + 64 hapax types
    assert not any(w.startswith("rare") for w in train + held_out)
    with pytest.raises(InputError, match="only 64 are seen --min-count 3 times"):
        split_dictionary(base_sentences(spec), BenchSpec(corpus=str(path), dictionary_share=0.6, min_count=3))


ADJECTIVES = ["big", "small", "red", "old", "happy", "quiet"]
NOUNS = ["dog", "cat", "bird", "horse", "fish", "child", "teacher", "farmer"]
VERBS = ["sees", "likes", "follows", "finds", "helps"]


def parsed_corpus(path: Path, n: int, seed: int = 0) -> Path:
    """CoNLL-U of template sentences "the ADJ NOUN VERB a NOUN ." with their dependency trees."""
    rng = random.Random(seed)
    blocks = []
    for _ in range(n):
        adjective, subject, verb, obj = rng.choice(ADJECTIVES), rng.choice(NOUNS), rng.choice(VERBS), rng.choice(NOUNS)
        rows = [
            ("the", "DET", 3, "det"),
            (adjective, "ADJ", 3, "amod"),
            (subject, "NOUN", 4, "nsubj"),
            (verb, "VERB", 0, "root"),
            ("a", "DET", 6, "det"),
            (obj, "NOUN", 4, "obj"),
            (".", "PUNCT", 4, "punct"),
        ]
        blocks.append(
            "\n".join(
                [f"# text = {' '.join(r[0] for r in rows)}"]
                + [
                    f"{i}\t{form}\t_\t{upos}\t_\t_\t{head}\t{rel}\t_\t_"
                    for i, (form, upos, head, rel) in enumerate(rows, 1)
                ]
            )
        )
    path.write_text("\n\n".join(blocks) + "\n\n", encoding="utf-8")
    return path


def test_syntax_transformation_reads_parses_and_reorders_towards_the_target(tmp_path):
    spec = BenchSpec(corpus=str(parsed_corpus(tmp_path / "base.conllu", 300)), max_sentences=100, seed=1)
    sentences, reordered = base_corpus(spec)
    assert len(sentences) == len(reordered) == 100 and len(set(sentences)) == 100  # distinct, capped
    for base, french in zip(sentences, reordered):
        the, adjective, subject, verb, a, obj, period = base.split()
        assert french.split() == [the, subject, adjective, verb, a, obj, period]  # French: adjective after noun
    translit = Transliteration.for_text(sentences)
    assert derive(sentences, "translit_syn", translit, reordered=reordered) == [translit.sentence(s) for s in reordered]
    with pytest.raises(ValueError, match="translit_syn needs every sentence re-ordered"):
        derive(sentences, "translit_syn", translit)
    japanese = base_corpus(BenchSpec(corpus=spec.corpus, max_sentences=100, seed=1, syntax_target="jpn"))[1]
    assert all(s.split()[-2] in VERBS for s in japanese)  # SOV: the verb last, before the period
    assert base_corpus(BenchSpec(corpus=str(corpus(tmp_path)), max_sentences=10))[1] is None  # no parses


def test_translit_syn_without_a_parsed_corpus_is_refused_before_training(tmp_path):
    spec = BenchSpec(
        corpus=str(corpus(tmp_path)), transformations=("translit", "translit_syn"), output_dir=str(tmp_path / "out")
    )
    with pytest.raises(
        InputError,
        match=r"translit_syn re-orders sentences by their dependency parses: pass "
        r"--corpus FILE\.conllu",
    ):
        run_bench(spec)
    assert not (tmp_path / "out").exists()
    assert "translit_syn" not in BenchSpec().transformations  # the default runs on plain text


@pytest.mark.parametrize("target", ["fr", "French", "FRA", "fre"])
def test_a_syntax_target_in_any_form_of_its_language_is_its_uriel_code(tmp_path, monkeypatch, target):
    monkeypatch.setattr(
        "distalign.synthetic_languages.benchmark.check_runs", lambda spec, *args: pytest.fail(spec.syntax_target)
    )
    spec = BenchSpec(
        corpus=str(parsed_corpus(tmp_path / "base.conllu", 30)),
        transformations=("translit_syn",),
        syntax_target=target,
        eval_words=3,
        min_count=1,
        output_dir=str(tmp_path / "out"),
    )
    with pytest.raises(pytest.fail.Exception, match="^fra$"):  # the spec the runs get (and MLflow logs)
        prepare_bench(spec)


@pytest.mark.parametrize(
    "target, says",
    [
        ("Frnch", r"syntax_target \(--syntax-target\): language 'Frnch': 'Frnch' is not a language code"),
        ("qqq", r"syntax_target \(--syntax-target\): language 'qqq': URIEL \(lang2vec\) has no syntax_knn vector"),
        ("fr.conllu", r"syntax_target \(--syntax-target\): file not found: fr.conllu"),
    ],
)
def test_an_unknown_syntax_target_is_named_before_the_world_is_made(tmp_path, monkeypatch, target, says):
    monkeypatch.setattr(
        "distalign.synthetic_languages.benchmark.with_world", lambda *args: pytest.fail("the world was made")
    )
    spec = BenchSpec(
        world=20, transformations=("translit_syn",), syntax_target=target, output_dir=str(tmp_path / "out")
    )
    with pytest.raises((ConfigError, InputError), match=f"^{says}"):
        prepare_bench(spec)


def test_a_run_whose_dictionary_is_too_small_is_refused_before_ray(tmp_path, monkeypatch):
    import distalign.ray_session

    monkeypatch.setattr(distalign.ray_session, "ensure_ray", lambda: pytest.fail("Ray started"))
    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path / "home"))
    spec = BenchSpec(
        corpus=str(corpus(tmp_path)),
        transformations=("translit",),
        objectives=("mlm", "lexical"),
        eval_words=10,
        min_count=1,
        output_dir=str(tmp_path / "out"),
    )
    # 64 word types: 16 dictionary words, 6 for training, against 64 pairs x 2 workers per batch; the MLM run
    # comes first but would be trained before the lexical run failed
    with pytest.raises(
        InputError,
        match=r"run translit / lexical: data.constraints: only 6 constraint pairs left .* --dictionary-share",
    ):
        run_bench(spec)


def test_shared_words_reach_the_model_untransliterated(tmp_path, monkeypatch):
    """--shared-words S: S of the base corpus's word types (none of them dictionary words) keep their spelling in
    the derived corpus, and the MLM batches of the derived language carry them so."""
    from distalign.models.loading import load_tokenizer
    from distalign.preparation.inputs import prepare_data
    from distalign.preparation.ray_streams import local_streams

    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path / "home"))
    spec = BenchSpec(
        corpus=str(corpus(tmp_path)),
        transformations=("translit",),
        objectives=("mlm",),
        eval_words=4,
        min_count=1,
        shared_words=0.25,
        output_dir=str(tmp_path / "out"),
    )
    bench = prepare_bench(spec)
    paths, kept = bench.data["translit"], bench.translit.kept
    assert len(kept) == 16  # a quarter of the 64 word types
    dictionary = {
        line.split("\t")[0] for key in ("train_dict", "eval_dict") for line in paths[key].read_text().splitlines()
    }
    assert dictionary and not kept & dictionary

    base_alphabet = set(bench.translit.table)

    def untransliterated(words) -> set[str]:
        return {w for w in words if set(w) <= base_alphabet}

    derived_lines = paths["derived"].read_text().splitlines()
    assert untransliterated(w for line in derived_lines for w in line.split()) == kept
    config = training_config(bench.spec, "translit", "mlm", paths, bench.out_dir)
    prepared = prepare_data(config)
    tokenizer = load_tokenizer(prepared.model_path)
    batches = local_streams(prepared, config)["corpus"]
    derived = [
        tokenizer.decode(ids, skip_special_tokens=True)
        for _ in range(3)
        for batch in [next(batches)]
        for ids, lang in zip(batch["input_ids"], batch["lang_id"])
        if lang == 1
    ]
    assert derived and set(derived) <= set(derived_lines)  # what the model reads is the derived corpus
    seen = [w for text in derived for w in text.split()]
    assert untransliterated(seen) <= kept and untransliterated(seen)  # the shared words, in the base spelling
    # the share of shared words among the words read is the base sentences' share of kept words
    base_lines = paths["base"].read_text().splitlines()
    twins = [base_lines[derived_lines.index(text)].split() for text in derived]
    assert len(untransliterated_occurrences := [w for w in seen if set(w) <= base_alphabet]) / len(
        seen
    ) == pytest.approx(sum(w in kept for words in twins for w in words) / sum(map(len, twins)))
    assert untransliterated_occurrences

    with pytest.raises(InputError, match="only 48 word types are outside the dictionary"):
        prepare_bench(replace(spec, shared_words=0.9))


def test_finished_cells_are_reused_by_a_later_bench_until_their_inputs_change(tmp_path, monkeypatch):
    """A bench in pieces: each cell's scores are kept in the output directory; a later bench with all the cells
    runs none of those finished with the same inputs, and runs again those whose config or data changed."""
    import distalign.synthetic_languages.benchmark as synthetic

    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path / "home"))
    ran = []

    def fake_cell(bench, transformation, objective, seed, parent_id):
        ran.append((transformation, objective, seed))
        return {"transformation": transformation, "objective": objective, "seed": seed, "alignment": len(ran) / 3}

    monkeypatch.setattr(synthetic, "run_cell", fake_cell)
    spec = BenchSpec(
        corpus=str(corpus(tmp_path)),
        transformations=("translit", "translit_inv"),
        objectives=("mlm",),
        eval_words=10,
        min_count=1,
        seeds=2,
        output_dir=str(tmp_path / "out"),
    )
    piece = synthetic.run_cells(prepare_bench(replace(spec, transformations=("translit_inv",))), "")
    assert ran == [("translit_inv", "mlm", 0), ("translit_inv", "mlm", 1)]
    full = prepare_bench(spec)
    results = synthetic.run_cells(full, "")
    assert ran[2:] == [("translit", "mlm", 0), ("translit", "mlm", 1)]  # only the cells not run before
    assert results[2:] == piece  # the kept scores, as the piece returned them
    ran.clear()
    assert synthetic.run_cells(prepare_bench(spec), "") == results and not ran  # everything finished: aggregate only
    full.data["translit"]["derived"].write_text("changed\n")
    synthetic.run_cells(full, "")
    assert ran == [("translit", "mlm", 0), ("translit", "mlm", 1)]  # its data changed
    ran.clear()
    synthetic.run_cells(prepare_bench(replace(spec, overrides=["train.max_steps=7"])), "")
    assert len(ran) == 4  # a training setting changed
