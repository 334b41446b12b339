"""A distalign checkpoint's additions to the plain model at fine-tuning and test time (no Ray): BabelBERT's
adapters re-attached under the task head (what is trained, what stays frozen), and DICT-MLM's input language
table exported by a real checkpoint, added with the right language's row in transfer and in ``distalign eval``."""

from __future__ import annotations

import pytest
import torch
from conftest import REPO, SMALL
from safetensors.torch import load_file
from test_transfer_finetune import task_data
from transfer_data import save_task, tiny_model

from distalign.models.adapters import ADAPTER_WEIGHTS, add_bottleneck_adapters, save_pretrained_with_adapters
from distalign.models.language_embeddings import (
    LANGUAGE_CONFIG,
    input_language,
    input_languages,
    position_ids,
    read_input_languages,
    save_input_languages,
)
from distalign.models.loading import load_masked_lm, load_tokenizer
from distalign.transfer import finetune
from distalign.transfer.finetune import FineTuneJob, fine_tune, load_model, trained_parameters
from distalign.transfer.tasks.base import FineTuneSettings
from distalign.transfer.tasks.pair import XNLITask
from distalign.transfer.tasks.tagging import UDPOSTask

SETTINGS = FineTuneSettings(lr=1e-2, batch_size=8, epochs=1, max_length=32, source="test")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """Fixtures in en and de, the plain tiny model, and the same model with trained-looking (random) adapters."""
    root = tmp_path_factory.mktemp("transfer_models")
    for lang in ("en", "de"):
        save_task(root / "data", "udpos", lang, sizes=(16, 6, 6))
    plain = tiny_model(root / "plain")
    masked_lm = load_masked_lm(str(plain))
    torch.manual_seed(3)
    for adapter in add_bottleneck_adapters(masked_lm, reduction_factor=4):
        torch.nn.init.normal_(adapter.up.weight)  # non-zero everywhere: a copy that went astray would show
    save_pretrained_with_adapters(masked_lm, root / "adapters")
    load_tokenizer(str(plain)).save_pretrained(root / "adapters")
    return root / "data", str(plain), str(root / "adapters")


def test_the_checkpoint_adapters_reach_the_task_model_and_only_they_and_the_head_train(setup):
    _, _, with_adapters = setup
    saved = load_file(f"{with_adapters}/{ADAPTER_WEIGHTS}")
    model = load_model(with_adapters, UDPOSTask)
    name = "roberta.encoder.layer.0.output.adapter.up.weight"  # by hand: layer 0's up-projection, as saved
    assert torch.equal(model.get_parameter(name), saved[name])
    assert torch.equal(dict(model.named_parameters())[name], saved[name]) and saved[name].abs().sum() > 0
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == set(saved) | {"classifier.weight", "classifier.bias"}
    assert trained_parameters(model).startswith("adapters + task head (")
    assert trained_parameters(model).endswith("; frozen: encoder")

    everything = load_model(with_adapters, UDPOSTask, adapter_training="all")
    assert all(p.requires_grad for p in everything.parameters())
    assert trained_parameters(everything).startswith("encoder + adapters + task head (")
    # the adapters are called: the encoder's output differs from the plain encoder's
    plain = load_model(setup[1], UDPOSTask)
    ids = torch.tensor([[0, 10, 11, 12, 2]])
    with torch.no_grad():
        assert not torch.allclose(model.base_model(ids).last_hidden_state, plain.base_model(ids).last_hidden_state)


def test_fine_tuning_with_adapters_moves_adapters_and_head_and_leaves_the_encoder(setup, gloo_group, monkeypatch):
    """The weights the test sets are scored with: the encoder as saved, adapters and head moved."""
    data_dir, _, with_adapters = setup
    tokenizer = load_tokenizer(with_adapters)
    before = load_model(with_adapters, UDPOSTask).state_dict()
    scored, real_evaluate = {}, finetune.evaluate

    def evaluate(model, task, features, *args):
        scored.update({k: v.detach().clone() for k, v in model.state_dict().items()})
        return real_evaluate(model, task, features, *args)

    monkeypatch.setattr(finetune, "evaluate", evaluate)
    result = fine_tune(
        FineTuneJob(task="udpos", seed=0, model_path=with_adapters, settings=SETTINGS),
        task_data(UDPOSTask, data_dir, tokenizer),
        tokenizer.pad_token_id,
        0,
        1,
        torch.device("cpu"),
    )
    moved = {k for k in before if k in scored and not torch.equal(before[k], scored[k])}
    assert moved and all(".adapter." in k or k.startswith("classifier.") for k in moved)
    assert any(".adapter." in k for k in moved)
    assert result["trained"].startswith("adapters + task head")


def tiny_table(model_dir, languages=("en", "de")) -> torch.Tensor:
    hidden = load_masked_lm(model_dir).config.hidden_size
    weight = torch.randn(len(languages), hidden, generator=torch.Generator().manual_seed(5))
    save_input_languages(model_dir, weight, languages, "dict_mlm")
    return weight


def test_the_row_of_the_language_in_use_is_added_to_the_word_embeddings(setup, tmp_path):
    """By hand: the word embeddings' output gains E_lang[de] at every position under ``input_language("de")``;
    nothing without a language; the encoder's states are those of ``E_word + E_lang`` fed as embeddings."""
    import shutil

    model_dir = shutil.copytree(setup[1], tmp_path / "model")
    weight = tiny_table(model_dir)
    model = load_model(str(model_dir), XNLITask)
    ids = torch.tensor([[0, 10, 11, 12, 2, 1]])
    words = model.base_model.embeddings.word_embeddings
    with torch.no_grad():
        plain = words(ids)
        with input_language(model, "de"):
            added = words(ids)
            states = model.base_model(ids).last_hidden_state
        assert torch.equal(words(ids), plain)  # the block restored "no language"
        expected = model.base_model(inputs_embeds=plain + weight[1], position_ids=position_ids(model, ids))
    assert torch.allclose(added - plain, weight[1].expand_as(plain), atol=1e-6)
    assert torch.allclose(states, expected.last_hidden_state, atol=1e-5)
    with pytest.raises(ValueError, match="'fr' has no language embedding"):
        with input_language(model, "fr"):
            pass
    assert "input language embeddings added and frozen (en, de)" in trained_parameters(model)
    assert not model.base_model.embeddings.input_languages.embedding.weight.requires_grad


def test_fine_tuning_adds_the_source_row_and_each_test_language_its_own(setup, tmp_path, gloo_group, monkeypatch):
    import shutil

    data_dir, plain, _ = setup
    model_dir = shutil.copytree(plain, tmp_path / "model")
    tiny_table(model_dir)
    rows_seen = []

    def record(module, inputs, output):
        rows_seen.append(table.current)

    real_load = finetune.load_model

    def load(*args):
        nonlocal table
        model = real_load(*args)
        table = finetune.input_languages(model)
        model.base_model.embeddings.word_embeddings.register_forward_hook(record)
        return model

    table = None
    monkeypatch.setattr(finetune, "load_model", load)
    monkeypatch.setattr(
        finetune,
        "evaluate",
        lambda model, task, features, *args: {
            "acc": float(rows_seen.append(("scored", table.current, len(features))) or 0.5)
        },
    )
    monkeypatch.setattr(
        finetune,
        "predict",
        lambda model, task, features, *args: (  # the test sets
            rows_seen.append(("scored", table.current, len(features))) or [([0], [0])]
        ),
    )
    tokenizer = load_tokenizer(str(model_dir))
    data = task_data(UDPOSTask, data_dir, tokenizer)
    fine_tune(
        FineTuneJob(task="udpos", seed=0, model_path=str(model_dir), settings=SETTINGS, source="de"),
        data,
        tokenizer.pad_token_id,
        0,
        1,
        torch.device("cpu"),
    )
    training = [row for row in rows_seen if not isinstance(row, tuple)]
    assert training == [1, 1]  # two batches of the source (here "de", row 1)
    scored = [row[1] for row in rows_seen if isinstance(row, tuple)]
    assert scored == [0, 0, 1]  # the dev set (en), then the test sets of en and de, each its own row


def test_a_real_dict_mlm_checkpoint_exports_its_table_and_eval_adds_it(tmp_path, monkeypatch, gloo_group):
    """Train DICT-MLM two steps in-process (then set its table to random rows) and save a checkpoint through the
    recipe: the table beside the model is the objective's,
    row by row in the run's language order; ``distalign eval``'s encoder adds the text set's language's row; the in-loop
    BLI (the recipe's evaluation) adds each word set's row the same way and scores what ``distalign eval`` scores."""
    from distalign.config import load_config
    from distalign.eval.distributed import load_encoder
    from distalign.eval.local_evaluation import encode_text_set
    from distalign.eval.tasks import SENTENCES, TextSet
    from distalign.preparation.inputs import prepare_data
    from distalign.preparation.ray_streams import local_streams
    from distalign.train.recipe import TrainingRecipe
    from distalign.train.trainer import plan_training

    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path))
    config = load_config(
        REPO / "jobs" / "configs" / "dict_mlm_tiny.yaml", SMALL + ["run.name=dict-export", "train.num_workers=1"]
    )
    prepared = prepare_data(config)
    recipe = TrainingRecipe(plan_training(config, prepared, ""))
    recipe.setup()
    streams = local_streams(prepared, config)
    for _ in range(2):
        recipe.step([{name: next(stream) for name, stream in streams.items()}])
    trained = recipe.engine.module.objectives["dict_mlm"].language_embeddings.embedding.weight
    assert trained.abs().sum() > 0  # the zero-initialised table learns
    with torch.no_grad():  # two steps move only the first batches' languages: make every row distinct
        trained.normal_()
    (tmp_path / "checkpoint").mkdir()
    recipe.save(tmp_path / "checkpoint")
    exported, trained = tmp_path / "checkpoint" / "model", trained.detach()
    table = read_input_languages(exported)
    assert table.languages == tuple(recipe.plan.languages) == ("xa", "xb", "xc")
    assert torch.equal(table.embedding.weight, trained)
    assert (exported / LANGUAGE_CONFIG).is_file()

    encoder, tokenizer = load_encoder(str(exported))
    plain = load_masked_lm(str(exported))
    sentences = ["xb1 xb2 xb3", "xb4 xb5"]
    vectors = encode_text_set(encoder, tokenizer, TextSet(SENTENCES, "xb", sentences))
    unknown = encode_text_set(encoder, tokenizer, TextSet(SENTENCES, "zz", sentences))  # no row: none added
    enc = tokenizer(sentences, padding=True, return_tensors="pt", return_special_tokens_mask=True)
    with torch.no_grad():  # by hand: the DICT-MLM objective's own input path with language xb (row 1)
        inputs = plain.get_input_embeddings()(enc["input_ids"]) + trained[1]
        states = plain.base_model(
            inputs_embeds=inputs,
            position_ids=position_ids(plain, enc["input_ids"]),
            attention_mask=enc["attention_mask"],
        ).last_hidden_state
        bare = plain.base_model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state
    mask = (enc["attention_mask"] * (1 - enc["special_tokens_mask"])).unsqueeze(-1).float()
    pooled = lambda h: (h * mask).sum(1) / mask.sum(1)  # noqa: E731
    assert torch.allclose(vectors[-1], pooled(states), atol=1e-5)
    assert torch.allclose(unknown[-1], pooled(bare), atol=1e-5)
    assert not torch.allclose(vectors[-1], unknown[-1], atol=1e-2)

    # the in-loop BLI, which selects the checkpoint, is what ``distalign eval``'s encoder gives the saved one
    from distalign.eval.selection import evaluate_bli, in_loop_settings
    from distalign.models.encoder import Encoder

    test_sets, settings = recipe.plan.bli_test_sets, in_loop_settings(config.eval, config.model, seed=config.train.seed)
    assert {(t.lang1, t.lang2) for t in test_sets} and all(t.lang1 != t.lang2 for t in test_sets)
    in_loop = recipe.evaluate()
    in_loop = {k: v for k, v in in_loop.items() if k.startswith("eval/bli/")}
    offline = evaluate_bli(encoder, tokenizer, test_sets, settings)
    assert in_loop == pytest.approx(offline, abs=1e-6)
    without = evaluate_bli(Encoder(plain).eval(), tokenizer, test_sets, settings)
    assert without != pytest.approx(offline, abs=1e-6)  # the rows matter: the comparison can fail
    assert input_languages(recipe.engine.module) is None  # the table was attached for the evaluation only


def test_a_language_without_a_row_is_refused_before_ray(setup, tmp_path):
    import shutil

    from distalign.errors import InputError
    from distalign.eval.checkpoint_eval import resolve_model
    from distalign.transfer.zero_shot import TransferSpec, prepare

    data_dir, plain, _ = setup
    model_dir = shutil.copytree(plain, tmp_path / "model")
    tiny_table(model_dir, languages=("en", "fr"))
    spec = TransferSpec(model=str(model_dir), tasks=("udpos",), data_dir=str(data_dir), languages=("de",))
    with pytest.raises(
        InputError, match=r"udpos: .* has input language embeddings for \['en', 'fr'\], none for \['de'\]"
    ):
        prepare(spec, resolve_model(None, str(model_dir)), progress=lambda line: None)


def test_distalign_eval_says_it_adds_the_table_and_which_languages_have_no_row(setup, tmp_path, capsys):
    import shutil
    from types import SimpleNamespace

    from distalign.eval.checkpoint_eval import report_input_languages
    from distalign.eval.tasks import WORDS, TextSet

    model_dir = shutil.copytree(setup[1], tmp_path / "model")
    tiny_table(model_dir)
    sets = {"src": TextSet(WORDS, "de", ["a"]), "tgt": TextSet(WORDS, "fr", ["b"])}
    task = SimpleNamespace(text_sets=lambda: sets)
    report_input_languages(str(model_dir), [task])
    out = capsys.readouterr().out
    assert "input language table (en, de)" in out and "WARNING no language embedding for fr" in out
    report_input_languages(setup[1], [task])  # a model without a table: nothing to say
    assert capsys.readouterr().out == ""
