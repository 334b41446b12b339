"""The transfer metrics and the first-subword alignment against hand computations."""

import pytest
from tiny_tokenizers import wordpiece_tokenizer

from distalign.transfer.metrics import IGNORE, accuracy, entity_scores, first_subword_labels
from distalign.transfer.tasks.pair import XNLITask
from distalign.transfer.tasks.tagging import TaggedSentence, UDPOSTask, WikiANNTask


def test_accuracy_by_hand():
    assert accuracy([0, 1, 2, 1], [0, 2, 2, 1]) == 0.75
    assert XNLITask.score([(0, 0), (1, 2), (2, 2), (1, 1)]) == {"acc": 0.75}
    with pytest.raises(ValueError):
        accuracy([], [])


def test_pos_accuracy_counts_words_not_sentences():
    # 3 of 4 words right, though only one of the two sentences is all right: 0.75, not 0.5
    assert UDPOSTask.score([([0, 1, 2], [0, 1, 1]), ([3], [3])]) == {"acc": 0.75}


def test_entity_f1_by_hand():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "I-ORG"]]
    pred = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "O"]]
    # gold entities: PER(0-1), LOC(3) | ORG(0-1); predicted: PER(0-1), ORG(3) | ORG(0-0); one exact match
    scores = entity_scores(gold, pred)
    assert scores["precision"] == pytest.approx(1 / 3)
    assert scores["recall"] == pytest.approx(1 / 3)
    assert scores["f1"] == pytest.approx(1 / 3)
    # the task scores label ids through its label names
    ids = [[[WikiANNTask.labels.index(t) for t in s] for s in side] for side in (gold, pred)]
    assert WikiANNTask.score(list(zip(*ids)))["f1"] == pytest.approx(1 / 3)
    # one more predicted entity that is wrong: precision 1/4, recall 1/3, F1 = 2PR/(P+R) = 2/7
    scores = entity_scores(gold + [["O"]], pred + [["B-LOC"]])
    assert scores["precision"] == pytest.approx(1 / 4) and scores["f1"] == pytest.approx(2 / 7)


def test_first_subword_labels_by_hand():
    #          <s>   w0  w0  w1  w2  w2  w2  </s>
    word_ids = [None, 0, 0, 1, 2, 2, 2, None]
    assert first_subword_labels(word_ids, [5, 6, 7]) == [IGNORE, 5, IGNORE, 6, 7, IGNORE, IGNORE, IGNORE]


def test_encoded_labels_sit_on_each_words_first_wordpiece():
    tokenizer = wordpiece_tokenizer(["the unbelievable walkers walked quickly home"] * 20, vocab_size=40)
    sentence = TaggedSentence(("unbelievable", "walkers", "home"), (1, 2, 3))
    (features,) = WikiANNTask.encode([sentence], tokenizer, max_length=64)
    tokens = tokenizer.convert_ids_to_tokens(features["input_ids"])
    labelled = [(token, label) for token, label in zip(tokens, features["labels"]) if label != IGNORE]
    # independently: each word tokenised alone, its label on its first piece
    expected = [(tokenizer.tokenize(word)[0], tag) for word, tag in zip(sentence.words, sentence.tags)]
    assert labelled == expected
    assert len(tokens) > len(sentence.words) + 2  # some word was split, so the test means something
    assert all(not token.startswith("##") for token, _ in labelled)


def test_sentence_pairs_keep_bert_segment_ids():
    """An mBERT-style tokenizer marks the second text with segment 1; the features and the batch carry it."""
    from tokenizers import processors

    from distalign.transfer.finetune import collate, compact
    from distalign.transfer.tasks.pair import PairExample

    tokenizer = wordpiece_tokenizer(["a dog sees a cat"] * 5, vocab_size=30)
    tokenizer.model_input_names = ["input_ids", "token_type_ids", "attention_mask"]  # as BertTokenizerFast's
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    features = XNLITask.encode([PairExample("a dog", "a cat sees", 1), PairExample("dog", "cat", 0)], tokenizer, 16)
    assert features[0]["token_type_ids"] == [0, 0, 0, 0, 1, 1, 1, 1]
    for given in (features, compact(features)):  # lists as encoded, or int32 arrays as the workers get them
        batch = collate(given, tokenizer.pad_token_id)
        assert batch["token_type_ids"].tolist()[1] == [0, 0, 0, 1, 1, 0, 0, 0]  # padded with 0
        assert batch["input_ids"][1, 5:].tolist() == [tokenizer.pad_token_id] * 3
        assert batch["labels"].tolist() == [1, 0]
