"""The fine-tuning worker without Ray (a gloo group of one): what reaches the loss, and which epoch is kept."""

from dataclasses import replace

import pytest
import torch
from transfer_data import save_task, tiny_model

from distalign.models.loading import load_tokenizer
from distalign.transfer import finetune
from distalign.transfer.data import read_split
from distalign.transfer.finetune import FineTuneJob, TaskData, compact, fine_tune
from distalign.transfer.metrics import IGNORE
from distalign.transfer.tasks.base import FineTuneSettings
from distalign.transfer.tasks.pair import XNLITask
from distalign.transfer.tasks.tagging import UDPOSTask

SETTINGS = FineTuneSettings(lr=1e-3, batch_size=8, epochs=3, max_length=32, source="test")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("transfer")
    for lang in ("en", "de"):
        save_task(root / "data", "udpos", lang, sizes=(16, 6, 6))
        save_task(root / "data", "xnli", lang, sizes=(16, 6, 6))
    model = tiny_model(root / "model")
    return root / "data", str(model), load_tokenizer(str(model))


def task_data(task, data_dir, tokenizer, dev_langs=("en",)):
    """The features as the runner hands them to the workers."""
    read = lambda lang, split: read_split(task, str(data_dir), lang, split)[0]  # noqa: E731
    encode = lambda examples: compact(task.encode(examples, tokenizer, SETTINGS.max_length))  # noqa: E731
    return TaskData(
        encode(read("en", "train")),
        {lang: encode(read(lang, "validation")) for lang in dev_langs},
        {lang: encode(read(lang, "test")) for lang in ("en", "de")},
    )


def without_trailing_ignores(labels: list[int]) -> tuple[int, ...]:
    return tuple(labels[: max(i for i, label in enumerate(labels) if label != IGNORE) + 1])


def test_the_loss_sees_the_first_subword_labels_of_the_words_read(setup, gloo_group, monkeypatch):
    data_dir, model, tokenizer = setup
    sentences, _ = read_split(UDPOSTask, str(data_dir), "en", "train")
    # independently of the encoder: each word tokenised alone, its tag on the first piece, <s> and </s> unlabelled
    expected = set()
    for sentence in sentences:
        labels = [IGNORE]
        for word, tag in zip(sentence.words, sentence.tags):
            labels += [tag] + [IGNORE] * (len(tokenizer.tokenize(word)) - 1)
        expected.add(without_trailing_ignores(labels))
    assert any(len(tokenizer.tokenize(w)) > 1 for s in sentences for w in s.words)  # some words are split
    seen, real_loss = [], finetune.task_loss
    monkeypatch.setattr(
        finetune, "task_loss", lambda logits, labels: seen.append(labels.clone()) or real_loss(logits, labels)
    )
    job = FineTuneJob(
        task="udpos",
        seed=0,
        model_path=model,
        settings=FineTuneSettings(lr=1e-3, batch_size=8, epochs=1, max_length=32, source="test"),
    )
    fine_tune(job, task_data(UDPOSTask, data_dir, tokenizer), tokenizer.pad_token_id, 0, 1, torch.device("cpu"))
    assert len(seen) == 2  # 16 sentences, batches of 8, one epoch
    # a batch is padded to its longest row: compare up to each row's last label
    assert {without_trailing_ignores(row.tolist()) for batch in seen for row in batch} == expected


def test_the_epoch_kept_is_the_best_on_the_protocols_dev_sets(setup, gloo_group, monkeypatch):
    """Scripted dev scores peak at epoch 2: the test sets are scored with epoch 2's weights, and selection reads
    the dev sets it is given (target languages here, as --select-on target hands them)."""
    data_dir, model, tokenizer = setup
    scripted = iter([0.3, 0.9, 0.5])
    weights_at, real_predict = {}, finetune.predict

    def fingerprint(model_):
        return sum(p.detach().double().sum().item() for p in model_.parameters())

    def evaluate(model_, task, features, *args):  # the dev sets
        assert any(features is f for f in data.dev.values())
        weights_at[len(weights_at) + 1] = fingerprint(model_)
        return {"acc": next(scripted)}

    def predict(model_, task, features, *args):  # the test sets: predicted (and kept) with the selected weights
        weights_at.setdefault("test", fingerprint(model_))
        return real_predict(model_, task, features, *args)

    data = task_data(XNLITask, data_dir, tokenizer, dev_langs=("de",))
    monkeypatch.setattr(finetune, "evaluate", evaluate)
    monkeypatch.setattr(finetune, "predict", predict)
    result = fine_tune(
        FineTuneJob(task="xnli", seed=1, model_path=model, settings=SETTINGS),
        data,
        tokenizer.pad_token_id,
        0,
        1,
        torch.device("cpu"),
    )
    assert [h["selection"] for h in result["history"]] == [0.3, 0.9, 0.5]
    assert [list(h["dev"]) for h in result["history"]] == [["de"]] * 3
    assert result["selected_epoch"] == 2 and result["selected_step"] == 4  # 16 examples, batches of 8
    assert weights_at["test"] == weights_at[2] != weights_at[3]
    assert set(result["test"]) == {"en", "de"} and 0 <= result["test"]["de"]["acc"] <= 1
    # the test predictions kept, a row per example with label names, the score's own
    rows = result["predictions"]["de"]
    assert [row["id"] for row in rows] == list(range(6)) and {row["gold"] for row in rows} <= set(XNLITask.labels)
    assert result["test"]["de"]["acc"] == pytest.approx(sum(r["gold"] == r["predicted"] for r in rows) / 6)


def test_candidates_every_n_steps_and_the_final_weights(setup, gloo_group, monkeypatch):
    """XTREME's --save_steps: dev scored every 4 optimizer steps (of 6) and at the end."""
    data_dir, model, tokenizer = setup
    monkeypatch.setattr(finetune, "evaluate", lambda *args: {"acc": 0.5})
    result = fine_tune(
        FineTuneJob(task="xnli", seed=0, model_path=model, settings=replace(SETTINGS, select_every=4)),
        task_data(XNLITask, data_dir, tokenizer),
        tokenizer.pad_token_id,
        0,
        1,
        torch.device("cpu"),
    )
    assert [(h["step"], h["epoch"]) for h in result["history"]] == [(4, 2), (6, 3)]
    assert result["selected_step"] == 4  # a tie keeps the earlier weights


def test_sharded_scoring_equals_scoring_on_one_rank(setup, monkeypatch):
    """Two ranks each predict every other example; gathered and put back in order, they score as one rank does."""
    data_dir, model_path, tokenizer = setup
    data = task_data(UDPOSTask, data_dir, tokenizer)
    torch.manual_seed(0)
    model = finetune.load_model(model_path, UDPOSTask)
    args = (data.test["de"], tokenizer.pad_token_id)
    whole = finetune.evaluate(model, UDPOSTask, *args, 0, 1, 4, torch.device("cpu"))
    shares = {}

    def keep_share(rank):
        def gather(out, share):
            shares[rank] = share
            out[:] = [share, []]

        return gather

    for rank in (0, 1):
        monkeypatch.setattr(finetune.dist, "all_gather_object", keep_share(rank))
        finetune.evaluate(model, UDPOSTask, *args, rank, 2, 4, torch.device("cpu"))
    assert [i for i, _ in shares[0]] == [0, 2, 4] and [i for i, _ in shares[1]] == [1, 3, 5]
    monkeypatch.setattr(
        finetune.dist, "all_gather_object", lambda out, share: out.__setitem__(slice(None), [shares[1], shares[0]])
    )  # the order ranks arrive in does not matter
    assert finetune.evaluate(model, UDPOSTask, *args, 0, 2, 4, torch.device("cpu")) == whole


def test_an_epochs_last_partial_batch_is_kept_in_equal_shares_per_rank():
    assert finetune.epoch_batches(20, 8, 1) == [(0, 8), (8, 16), (16, 20)]  # XTREME and the HF Trainer keep it
    assert finetune.epoch_batches(21, 8, 2) == [(0, 8), (8, 16), (16, 20)]  # 5 left: 2 per rank, 1 left out
    assert finetune.epoch_batches(17, 8, 2) == [(0, 8), (8, 16)]  # 1 left for 2 ranks: every rank skips it
    assert finetune.epoch_batches(16, 8, 4) == [(0, 8), (8, 16)]


def test_fine_tuning_steps_on_the_last_partial_batch(setup, gloo_group, monkeypatch):
    data_dir, model, tokenizer = setup
    seen, real_loss = [], finetune.task_loss
    monkeypatch.setattr(
        finetune, "task_loss", lambda logits, labels: seen.append(len(labels)) or real_loss(logits, labels)
    )
    monkeypatch.setattr(finetune, "evaluate", lambda *args: {"acc": 0.5})
    data = task_data(XNLITask, data_dir, tokenizer)
    data.train = data.train[:13]
    result = fine_tune(
        FineTuneJob(task="xnli", seed=0, model_path=model, settings=replace(SETTINGS, epochs=2)),
        data,
        tokenizer.pad_token_id,
        0,
        1,
        torch.device("cpu"),
    )
    assert seen == [8, 5, 8, 5] and result["steps"] == 4
    assert [h["step"] for h in result["history"]] == [2, 4]  # each epoch's end is its partial batch
