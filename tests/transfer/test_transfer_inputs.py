"""Bad transfer inputs found on the driver, before Ray: lengths past the model's positions, unreadable folders,
splits with no usable row."""

import pytest
from transfer_data import FEATURES, rows, save_task, tiny_model
from transformers import BertConfig

from distalign.errors import InputError
from distalign.eval.checkpoint_eval import resolve_model
from distalign.models.loading import max_model_positions
from distalign.transfer.data import read_split
from distalign.transfer.tasks.pair import XNLITask
from distalign.transfer.zero_shot import TransferSpec, prepare


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return str(tiny_model(tmp_path_factory.mktemp("transfer_inputs") / "model"))


def test_positions_leave_out_xlmr_offset_and_bert_has_none(model, tmp_path):
    assert max_model_positions(model) == 64  # 66 rows, positions start after the padding id 1
    import shutil

    bert = shutil.copytree(model, tmp_path / "bert")
    BertConfig(
        vocab_size=80,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=40,
    ).save_pretrained(bert)
    assert max_model_positions(str(bert)) == 40


def test_a_task_length_past_the_models_positions_is_capped_with_a_line(model, tmp_path):
    for lang in ("en", "de"):
        save_task(tmp_path / "data", "udpos", lang, sizes=(8, 4, 4))
    lines = []
    spec = TransferSpec(model=model, tasks=("udpos",), data_dir=str(tmp_path / "data"), languages=("de",))
    spec.finetune.batch_size = 8
    [prepared] = prepare(spec, resolve_model(None, model), lines.append)
    assert prepared.settings.max_length == 64  # udpos's own 128
    assert any("udpos: max length 128 capped at 64, the most tokens model takes" in line for line in lines)


def test_a_folder_datasets_cannot_load_names_the_folder(tmp_path):
    folder = save_task(tmp_path, "xnli", "en", sizes=(4, 0, 2))  # datasets saves a 0-row split, cannot reload it
    with pytest.raises(
        InputError,
        match=rf"xnli: {folder}: datasets cannot load this save_to_disk folder "
        r"\(IndexError: .*\); a split with no rows",
    ):
        read_split(XNLITask, str(tmp_path), "en", "train")


def test_a_split_with_no_usable_row_gives_the_count_and_the_first_rows_reasons(model, tmp_path):
    from datasets import Dataset, DatasetDict

    save_task(tmp_path / "data", "wikiann", "de", sizes=(8, 4, 4))
    data = rows("wikiann", "en", 8, 0)
    data["ner_tags"] = [tags[:-1] for tags in data["ner_tags"]]  # every row one tag short
    folder = tmp_path / "data" / "wikiann" / "en"
    DatasetDict(
        {split: Dataset.from_dict(data, features=FEATURES["wikiann"]) for split in ("train", "validation", "test")}
    ).save_to_disk(str(folder))
    spec = TransferSpec(model=model, tasks=("wikiann",), data_dir=str(tmp_path / "data"), languages=("de",))
    with pytest.raises(InputError) as err:
        prepare(spec, resolve_model(None, model), lambda line: None)
    message = str(err.value)
    assert message.startswith(f"wikiann: no usable examples: {folder}[train]: 0 rows read, 8 malformed rows skipped")
    n = len(data["tokens"][0])
    assert f"\n  {folder}[train]:0: {n} words but {n - 1} tags" in message  # the reasons, row by row
