"""Tokenizers for tests, trained offline on a few sentences."""

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast


def wordpiece_tokenizer(texts, vocab_size: int) -> PreTrainedTokenizerFast:
    """An uncased BERT-style WordPiece tokenizer (``[CLS] a [SEP] b [SEP]``), the mBERT layout."""
    wp = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wp.normalizer = normalizers.BertNormalizer(lowercase=True)
    wp.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wp.decoder = decoders.WordPiece()
    wp.train_from_iterator(
        texts,
        trainers.WordPieceTrainer(
            vocab_size=vocab_size, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], show_progress=False
        ),
    )
    cls, sep = wp.token_to_id("[CLS]"), wp.token_to_id("[SEP]")
    wp.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=wp,
        cls_token="[CLS]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        mask_token="[MASK]",
        unk_token="[UNK]",
        model_max_length=64,
    )


def tokenizer_of_kind(kind: str, texts, directory) -> PreTrainedTokenizerFast:
    """``bert``: the WordPiece tokenizer above; ``xlmr``: the Unigram one of a tiny XLM-R-like model built offline
    into ``directory`` (the quickstart's kind)."""
    from distalign.config import TinyModelConfig
    from distalign.models.loading import build_tiny_model, load_tokenizer

    if kind == "bert":
        return wordpiece_tokenizer(texts, vocab_size=90)
    shape = TinyModelConfig(
        vocab_size=80, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=16, max_length=40
    )
    return load_tokenizer(str(build_tiny_model(directory, texts, shape)))
