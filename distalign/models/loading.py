"""Loading masked LMs by hub name or local directory, and building the offline ``tiny`` model.

Real runs name a hub model (``xlm-roberta-base``, ``bert-base-multilingual-uncased``) or a local
directory (e.g. a copy synced from S3). Offline, ``tiny`` builds a random-init XLM-R-style encoder
whose SentencePiece-Unigram tokenizer is trained on the run's own text, saved as an ordinary
Hugging Face directory so every other code path loads it the same way.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from distalign.errors import ConfigError

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase

# transformers and torch (distalign.models.attention too) are imported where they are used: every process that
# reads the configuration imports this module (the driver, Ray Data's tokenising tasks, a command checking its
# model before its own imports), and the model classes alone take seconds.


@functools.cache
def _transformers():
    import transformers

    # "Loading weights" / "Writing model shards" bars from every worker and eval task drown the progress lines
    transformers.utils.logging.disable_progress_bar()
    return transformers


@dataclass
class TinyModelConfig:
    """A random-init XLM-R-style encoder built offline (tokenizer trained on the run's text)."""

    vocab_size: int = 2000  # target size of the trained Unigram tokenizer
    hidden_size: int = 64  # width of the hidden states
    num_layers: int = 2  # transformer layers
    num_heads: int = 2  # attention heads per layer
    intermediate_size: int = 128  # width of the feed-forward sublayer
    max_length: int = 64  # max positions / tokens per sequence


# XLM-R's special tokens, in its id order.
SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


def build_tiny_model(out_dir: str | Path, texts: Iterable[str], cfg: TinyModelConfig, seed: int = 0) -> Path:
    """Train a tokenizer on ``texts``, build a random XLM-R-style masked LM, save both to ``out_dir``."""
    import torch
    from tokenizers import SentencePieceUnigramTokenizer
    from tokenizers.processors import TemplateProcessing

    transformers = _transformers()
    out = Path(out_dir)
    sp = SentencePieceUnigramTokenizer()
    sp.train_from_iterator(
        texts, vocab_size=cfg.vocab_size, special_tokens=SPECIALS, unk_token="<unk>", show_progress=False
    )
    bos, eos = sp.token_to_id("<s>"), sp.token_to_id("</s>")
    sp.post_processor = TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", bos), ("</s>", eos)]
    )
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=sp,
        bos_token="<s>",
        eos_token="</s>",
        cls_token="<s>",
        sep_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        mask_token="<mask>",
        model_max_length=cfg.max_length,
    )
    torch.manual_seed(seed)
    model_config = transformers.XLMRobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        intermediate_size=cfg.intermediate_size,
        max_position_embeddings=cfg.max_length + 2,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    model = transformers.XLMRobertaForMaskedLM(model_config)
    tmp = out.with_name(out.name + ".tmp")
    tokenizer.save_pretrained(tmp)
    model.save_pretrained(tmp)
    if not (tmp / "config.json").is_file():  # transformers writes models on rank 0 only once torch.distributed is up
        raise RuntimeError(
            f"{out}: the model was not written (rank {torch.distributed.get_rank()} of a process "
            "group): build the tiny model before the process group starts"
        )
    tmp.rename(out)  # a half-written model directory never looks complete
    return out


def check_model_directory(name_or_path: str, key: str) -> None:
    """A model named by a local path must be a Hugging Face model directory: a file (a checkpoint's JSON, a weights
    file) or a folder without ``config.json`` is a ``ConfigError`` naming ``key`` and the path (transformers would
    take the path for a hub name and fail with a validation message naming neither). Hub names pass."""
    path = Path(name_or_path).expanduser()
    holds = (
        "a model directory holds config.json, the weights (model.safetensors or pytorch_model.bin) and the "
        "tokenizer files, as save_pretrained writes them (a distalign checkpoint's is its model/ folder)"
    )
    if path.is_file():
        raise ConfigError(f"{key}: {name_or_path} is a file, not a model directory; {holds}")
    if path.is_dir() and not (path / "config.json").is_file():
        raise ConfigError(f"{key}: {name_or_path} has no config.json; {holds}")


def check_local_model(name_or_path: str, key: str) -> None:
    """A model named by a local path (absolute, relative, or existing here) must be a whole model directory
    (``check_model_directory``, ``check_model_files``); a hub name (``xlm-roberta-base``, ``org/model``) and a
    storage URI (``s3://...``) pass."""
    if "://" in name_or_path:  # a storage URI: checked where it is staged (distalign.model_store.locate)
        return
    path = Path(name_or_path).expanduser()
    if not path.exists():
        if name_or_path.startswith(("/", ".", "~")) or name_or_path.count("/") > 1:
            raise ConfigError(f"{key}: no such model directory: {name_or_path}")
        return
    check_model_directory(name_or_path, key)
    check_model_files(name_or_path, key)


HUB_TIMEOUT_S = 5.0  # one look at the Hub: an air-gapped node drops the packets, and transformers retries for ~30 s


def is_hub_name(name_or_path: str) -> bool:
    """``xlm-roberta-base``, ``org/model``: no local path, not the tiny model."""
    return (
        name_or_path != "tiny"
        and not Path(name_or_path).expanduser().exists()
        and not name_or_path.startswith(("/", ".", "~"))
        and "://" not in name_or_path
        and name_or_path.count("/") <= 1
    )


def check_hub_model(name_or_path: str, key: str) -> None:
    """A Hub model name must be in the local Hugging Face cache or reachable on the Hub, checked in one look of at
    most ``HUB_TIMEOUT_S`` before anything starts: else one ``ConfigError`` naming ``key``, the Hub and what to do
    (transformers would retry for about 30 s and end in a traceback naming neither). A cached model is looked up too
    unless HF_HUB_OFFLINE is set: a Hub that takes the connection and never answers would hold transformers' load
    forever. Local paths and ``tiny`` pass (``check_local_model`` checks paths)."""
    if not is_hub_name(name_or_path):
        return
    import httpx2  # huggingface_hub's HTTP client: its timeouts
    from huggingface_hub import constants, get_token, try_to_load_from_cache
    from huggingface_hub.errors import RepositoryNotFoundError
    from huggingface_hub.utils import get_session, hf_raise_for_status

    cached = isinstance(try_to_load_from_cache(name_or_path, "config.json"), str)
    if cached and constants.HF_HUB_OFFLINE:
        return  # loads from the cache without asking the Hub
    remedy = (
        f"download it where the Hub is reachable (distalign's nodes read the Hugging Face cache, "
        f"{constants.HF_HUB_CACHE}: `hf download {name_or_path}` there, or copy that cache to the "
        f"nodes and set HF_HUB_OFFLINE=1), or copy it where the nodes read it (`distalign model fetch "
        f"{name_or_path} --to DIR_OR_S3_URI` where the Hub is reachable) and give that path"
    )
    if constants.HF_HUB_OFFLINE:
        raise ConfigError(f"{key}: {name_or_path} is not in the Hugging Face cache and HF_HUB_OFFLINE is set; {remedy}")
    try:
        # the model's page in one request: HfApi's user-agent header first fetches the Hub's list of agent
        # harnesses (a second look, 3 s more where the Hub does not answer)
        token = get_token()
        hf_raise_for_status(
            get_session().get(
                f"{constants.ENDPOINT}/api/models/{name_or_path}",
                timeout=HUB_TIMEOUT_S,
                headers={"authorization": f"Bearer {token}"} if token else {},
            )
        )
    except RepositoryNotFoundError:
        if cached:
            return  # gone from the Hub, or private to another account: this node's copy is what loads
        raise ConfigError(
            f"{key}: {name_or_path}: no such model on the Hub ({constants.ENDPOINT}) or no access to "
            "it (a private or gated model needs HF_TOKEN)"
        ) from None
    except Exception as err:  # no route, a refused connection, a timeout, a proxy's refusal: the Hub is not there
        if cached and not isinstance(err, httpx2.TimeoutException):
            return  # refused at once: transformers falls back to the cached copy just as fast
        if cached:  # transformers asks the Hub for the model's revision with no time limit: it would wait forever
            raise ConfigError(
                f"{key}: {name_or_path} is in the Hugging Face cache, but the Hub ({constants.ENDPOINT}) "
                f"does not answer ({type(err).__name__} after {HUB_TIMEOUT_S:.0f} s) and loading the "
                "model would wait for it without a limit: set HF_HUB_OFFLINE=1 to load the cached copy "
                "without asking the Hub"
            ) from None
        raise ConfigError(
            f"{key}: {name_or_path}: the Hub ({constants.ENDPOINT}) cannot be reached from this "
            f"machine ({type(err).__name__}) and the model is not in its cache; {remedy}"
        ) from None


# save_pretrained's files: a tokenizer needs one of these (else transformers builds an empty one of the model's type,
# silently), the weights one of those
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "sentencepiece.bpe.model", "spiece.model")
WEIGHTS_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)


def check_model_files(directory: str, key: str) -> None:
    """A local model directory's tokenizer and weights, checked before anything starts: tokenizer files present and
    loading, no more tokens than the model has embeddings (another model's tokenizer), a weights file whose
    safetensors headers read. Each problem is a ``ConfigError`` naming ``key``, the file and what to do."""
    from safetensors import safe_open

    path = Path(directory)
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        raise ConfigError(
            f"{key}: {directory} has no tokenizer files (one of {', '.join(TOKENIZER_FILES)}): copy "
            "the tokenizer the model was saved with into it (save_pretrained writes both)"
        )
    try:
        tokens = len(load_tokenizer(directory))
    except Exception as err:  # transformers raises what the tokenizer's own library does
        raise ConfigError(
            f"{key}: {directory}: its tokenizer does not load ({type(err).__name__}: {err}): copy the "
            "model's tokenizer files again"
        ) from None
    embeddings = getattr(_transformers().AutoConfig.from_pretrained(directory), "vocab_size", None)
    if embeddings and tokens > embeddings:
        raise ConfigError(
            f"{key}: {directory}: its tokenizer has {tokens} tokens, more than the model's {embeddings} "
            "embeddings (vocab_size): the tokenizer is another model's; copy this model's own tokenizer "
            "files"
        )
    if not any((path / name).is_file() for name in WEIGHTS_FILES):
        raise ConfigError(
            f"{key}: {directory} has no weights (one of {', '.join(WEIGHTS_FILES)}): copy them from "
            "where the model was saved"
        )
    for weights in sorted(path.glob("*.safetensors")):
        try:
            with safe_open(str(weights), "pt"):  # the header only: no tensor is read
                pass
        except Exception as err:  # safetensors' own error type, or an OSError
            raise ConfigError(
                f"{key}: {weights}: not a readable safetensors file ({err}): the copy is cut short or "
                "corrupted; copy the model again"
            ) from None


# Model types whose position ids start after the padding id (RoBERTa's ``create_position_ids_from_input_ids``), so
# pad_token_id + 1 rows of the position table are never a token's
POSITIONS_AFTER_PADDING = {"roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "data2vec-text"}


def max_model_positions(name_or_path: str) -> int:
    """Tokens per sequence (special tokens included) the model takes: its position table's rows (less RoBERTa's
    and XLM-R's offset), and no more than its tokenizer's ``model_max_length``. A longer sequence fails inside the
    model's embeddings with an index error naming no setting."""
    config = _transformers().AutoConfig.from_pretrained(name_or_path)
    positions = getattr(config, "max_position_embeddings", None) or float("inf")
    if config.model_type in POSITIONS_AFTER_PADDING:
        positions -= config.pad_token_id + 1
    return int(min(positions, load_tokenizer(name_or_path).model_max_length))


@functools.lru_cache(maxsize=4)
def load_tokenizer(name_or_path: str) -> PreTrainedTokenizerBase:
    tokenizer = _transformers().AutoTokenizer.from_pretrained(name_or_path)
    if not tokenizer.is_fast:
        raise ValueError(f"{name_or_path}: a fast tokenizer is needed (word alignment via word_ids)")
    return tokenizer


def load_masked_lm(name_or_path: str) -> torch.nn.Module:
    """The masked LM, its encoder given prepared attention masks (``distalign.models.attention``), in eval mode
    as ``from_pretrained`` leaves it (a trainer switches it to training)."""
    from distalign.models.attention import prepared_masks

    return prepared_masks(_transformers().AutoModelForMaskedLM.from_pretrained(name_or_path))
