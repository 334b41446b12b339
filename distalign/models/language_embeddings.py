"""Language embeddings at the input and a target-language-conditioned MLM head (DICT-MLM).

Paper: Chaudhary, Raman, Srinivasan & Chen (2020), "DICT-MLM: Improved Multilingual Pre-Training
using Bilingual Dictionaries". A masked word's label may be a synonym in *another* language, so
the model is told which language it reads and which language it must predict:

    input:   x_t = E_word[id_t] + E_lang_in[lang_t]                 (then the encoder as usual)
    output:  logits_t = W_dec · LN(gelu(W [h_t ; E_lang_out[target_lang_t]] + b)) + b_dec

The paper couples the two language tables (§2.3: "coupling the two help[s] improve performance
slightly and is thus the setup we use"): ``E_lang_out = E_lang_in`` by default; separate tables
are an option.

Both live in the DICT-MLM objective module during pre-training, not in the Hugging Face model, so the
exported model keeps its original embeddings and MLM head. The head is for pre-training only; the input
table is not (§3.1: "for all dict-mlm fine-tuning runs we add language embeddings with the token
embeddings as input to the transformer stack"). A checkpoint therefore exports it beside the model
(``save_input_languages``: ``language_embeddings.safetensors``, the [languages, d] table, and
``language_embeddings.json``, the language of each row); ``attach_input_languages`` adds it to any model
loaded from that directory (masked LM or task head) as a forward hook on the word embeddings, and
``input_language`` says which row to add: the fine-tuning language while fine-tuning, the test
language at test time. The table stays as pre-trained (frozen): in zero-shot transfer only the source
language's row would get a gradient, moving it away from the rows of the test languages it was
pre-trained beside (the paper does not say; this is distalign's choice).

Start = the plain model (continued pre-training starts from a pretrained checkpoint that must not
be disturbed by randomly initialised additions):
- ``E_lang_in`` is zero-initialised, so the input embeddings, and every hidden state, are exactly
  those of the plain model at step 0; its gradient (the sum of the input-embedding gradients of
  the language's tokens) is non-zero, so it still learns.
- ``W``'s hidden-state columns and ``b``, ``LN`` start as copies of the pretrained head's
  transform and its language columns start at zero (``load_pretrained_transform``), so the
  conditioned head's logits equal the pretrained head's at step 0. A separate ``E_lang_out`` is
  therefore randomly initialised: were it zero too, the language columns and the language vectors
  would both have zero gradient forever (each one's gradient is a product with the other). The
  coupled table escapes through the input: its first gradients come from the input side, and once
  it is non-zero the language columns learn too.
- ``W_dec``/``b_dec`` are the model's own output embeddings (tied to the input embeddings in
  XLM-R and mBERT), called as a module so DeepSpeed ZeRO-3 gathers them; a separate decoder would
  add vocab × hidden parameters (192M for XLM-R base) and lose the tying.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn

LANGUAGE_WEIGHTS = "language_embeddings.safetensors"
LANGUAGE_CONFIG = "language_embeddings.json"


class LanguageEmbeddings(nn.Module):
    """``E_lang_in``: one zero-initialised vector per language, added to the word embeddings."""

    def __init__(self, num_languages: int, hidden_size: int):
        super().__init__()
        self.embedding = nn.Embedding(num_languages, hidden_size)
        nn.init.zeros_(self.embedding.weight)

    def forward(self, masked_lm: nn.Module, input_ids: torch.Tensor, lang_ids: torch.Tensor) -> torch.Tensor:
        """``inputs_embeds`` [B, T, d] for ``masked_lm``; ``lang_ids`` is [B] (per sentence) or [B, T]."""
        lang = self.embedding(lang_ids)
        if lang_ids.dim() == 1:
            lang = lang.unsqueeze(1)
        return masked_lm.get_input_embeddings()(input_ids) + lang


def position_ids(masked_lm: nn.Module, input_ids: torch.Tensor) -> torch.Tensor | None:
    """The position ids the model would derive from ``input_ids`` itself.

    Given ``inputs_embeds`` instead of ids, RoBERTa-family models (XLM-R) cannot see padding and
    number every position sequentially; passing these ids keeps the outputs identical to a call
    with ``input_ids``. Other models (BERT) number positions 0..T-1 either way: None.
    """
    embeddings = masked_lm.base_model.embeddings
    if not hasattr(embeddings, "create_position_ids_from_input_ids"):
        return None
    return embeddings.create_position_ids_from_input_ids(input_ids, embeddings.padding_idx)


def known_lm_head(masked_lm: nn.Module) -> nn.Module | None:
    """The whole MLM head (transform and decoder: hidden states -> vocabulary logits) of an XLM-R/RoBERTa or
    BERT masked LM (``lm_head``, ``cls``); None for another architecture."""
    for name in ("lm_head", "cls"):
        if isinstance(getattr(masked_lm, name, None), nn.Module):
            return getattr(masked_lm, name)
    return None


def pretrained_lm_head(masked_lm: nn.Module) -> nn.Module:
    """``known_lm_head``, for code that cannot do without it."""
    head = known_lm_head(masked_lm)
    if head is None:
        raise ValueError(f"masked_lm: no known MLM head in {type(masked_lm).__name__} (expected lm_head or cls)")
    return head


def pretrained_lm_transform(masked_lm: nn.Module) -> tuple[nn.Linear, nn.LayerNorm]:
    """The (dense, layer norm) of the pretrained MLM head of an XLM-R/RoBERTa or BERT masked LM."""
    head = pretrained_lm_head(masked_lm)
    if hasattr(head, "predictions"):  # BERT's cls.predictions.transform
        return head.predictions.transform.dense, head.predictions.transform.LayerNorm
    return head.dense, head.layer_norm


class LanguageConditionedLMHead(nn.Module):
    """``LN(gelu(W [h ; E_lang_out[target]] + b))`` then the model's decoder (see module docstring)."""

    def __init__(
        self,
        hidden_size: int,
        num_languages: int,
        lang_dim: int | None = None,
        layer_norm_eps: float = 1e-5,
        init_std: float = 0.02,
        own_table: bool = True,
    ):
        """``own_table=False``: the head reads the language vectors passed to ``forward`` (the coupled
        input table, of ``hidden_size``) instead of its own ``E_lang_out``."""
        super().__init__()
        self.hidden_size = hidden_size
        self.target_language = None
        if own_table:
            self.target_language = nn.Embedding(num_languages, lang_dim or hidden_size)
            nn.init.normal_(self.target_language.weight, std=init_std)
        elif lang_dim not in (None, hidden_size):
            raise ValueError(f"lang_dim={lang_dim}: a coupled language table has the hidden size {hidden_size}")
        self.dense = nn.Linear(hidden_size + (lang_dim or hidden_size), hidden_size)
        self.layer_norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)

    @torch.no_grad()
    def load_pretrained_transform(self, dense: nn.Linear, layer_norm: nn.LayerNorm) -> None:
        """Copy the pretrained head's transform; the language columns of ``W`` start at zero."""
        if dense.weight.shape != (self.hidden_size, self.hidden_size):
            raise ValueError(
                f"dense: expected weight [{self.hidden_size}, {self.hidden_size}], got {list(dense.weight.shape)}"
            )
        self.dense.weight.zero_()
        self.dense.weight[:, : self.hidden_size].copy_(dense.weight)
        self.dense.bias.copy_(dense.bias)
        self.layer_norm.load_state_dict(layer_norm.state_dict())

    def forward(
        self,
        states: torch.Tensor,
        target_lang_ids: torch.Tensor,
        decoder: nn.Module,
        language_table: nn.Embedding | None = None,
    ) -> torch.Tensor:
        """Logits [..., V] from token states [..., d] and the target language id of each token
        (looked up in the head's own table, or in ``language_table`` when the tables are coupled)."""
        table = self.target_language if self.target_language is not None else language_table
        if table is None:
            raise ValueError("a head without its own language table needs language_table")
        x = torch.cat([states, table(target_lang_ids).to(states.dtype)], dim=-1)
        return decoder(self.layer_norm(F.gelu(self.dense(x))))


# ---------------------------------------------------------------------------------------------- export


def save_input_languages(directory: str | Path, weight: torch.Tensor, languages: Sequence[str], objective: str) -> None:
    """The input language table beside a saved model: row ``i`` is ``languages[i]``'s embedding."""
    if weight.dim() != 2 or weight.shape[0] != len(languages):
        raise ValueError(f"language table of shape {list(weight.shape)} for {len(languages)} languages")
    directory = Path(directory)
    save_file({"weight": weight.detach().cpu().contiguous()}, str(directory / LANGUAGE_WEIGHTS))
    (directory / LANGUAGE_CONFIG).write_text(json.dumps({"languages": list(languages), "objective": objective}))


class InputLanguages(nn.Module):
    """A pre-trained input language table and the language whose row is added to the word embeddings now."""

    def __init__(self, weight: torch.Tensor, languages: Sequence[str]):
        super().__init__()
        self.languages = tuple(languages)
        self.embedding = nn.Embedding.from_pretrained(weight, freeze=True)
        self.current: int | None = None  # None: add nothing (a language without a row)

    def add_current(self, module: nn.Module, inputs, output: torch.Tensor) -> torch.Tensor:
        """Forward hook of the word embeddings: E_word[id_t] + E_lang[current] at every position."""
        if self.current is None:
            return output
        return output + self.embedding.weight[self.current].to(output.dtype)


def read_input_languages(directory: str | Path) -> InputLanguages | None:
    """The table saved by ``save_input_languages`` in ``directory``, or None when there is none."""
    config_file = Path(directory) / LANGUAGE_CONFIG
    if not config_file.is_file():
        return None
    try:
        languages = json.loads(config_file.read_text())["languages"]
        weight = load_file(str(config_file.with_name(LANGUAGE_WEIGHTS)))["weight"]
    except (json.JSONDecodeError, KeyError, TypeError, FileNotFoundError) as error:
        raise ValueError(f"{config_file}: not a language table with its {LANGUAGE_WEIGHTS} ({error!r})") from error
    if weight.shape[0] != len(languages):
        raise ValueError(f"{config_file}: {len(languages)} languages for {weight.shape[0]} rows of {LANGUAGE_WEIGHTS}")
    return InputLanguages(weight, languages)


def attach_input_languages(model: nn.Module, directory: str | Path) -> InputLanguages | None:
    """Add the table saved in ``directory`` (if any) to ``model``'s input: it lives as
    ``base_model.embeddings.input_languages`` (hashed with the encoder's parameters) and adds its current
    language's row to the word embeddings' output, as DICT-MLM's ``LanguageEmbeddings`` does in pre-training."""
    table = read_input_languages(directory)
    if table is None:
        return None
    device = model.base_model.embeddings.word_embeddings.weight.device
    _install(model, table.to(device), Path(directory) / LANGUAGE_WEIGHTS)
    return table


def _install(model: nn.Module, table: InputLanguages, where: object):
    """``table`` as ``model``'s input language table (see ``attach_input_languages``); the hook's handle."""
    embeddings = model.base_model.embeddings
    if table.embedding.weight.shape[1] != embeddings.word_embeddings.embedding_dim:
        raise ValueError(
            f"{where}: width {table.embedding.weight.shape[1]}, the model's "
            f"word embeddings {embeddings.word_embeddings.embedding_dim}"
        )
    embeddings.input_languages = table
    return embeddings.word_embeddings.register_forward_hook(table.add_current)


@contextlib.contextmanager
def training_input_languages(model: nn.Module, weight: torch.Tensor, languages: Sequence[str]) -> Iterator[None]:
    """Inside the block, ``model`` (a masked LM) has the table being trained (``weight``, read in place, not copied)
    as its input language table, as ``attach_input_languages`` gives an exported checkpoint's: the in-loop
    evaluation, which selects the checkpoint, encodes as ``distalign eval`` and fine-tuning will. Afterwards the model
    is as before (the table is no submodule of it while it trains or is saved)."""
    handle = _install(model, InputLanguages(weight.detach(), languages), "the objective's language table")
    try:
        yield
    finally:
        handle.remove()
        del model.base_model.embeddings.input_languages


def input_languages(model: nn.Module) -> InputLanguages | None:
    """The table ``attach_input_languages`` added to ``model`` (a model, or an ``Encoder`` around one), if any."""
    embeddings = getattr(getattr(getattr(model, "masked_lm", model), "base_model", None), "embeddings", None)
    return getattr(embeddings, "input_languages", None)


@contextlib.contextmanager
def input_language(model: nn.Module, lang: str, strict: bool = True) -> Iterator[None]:
    """Inside the block, ``model``'s inputs get ``lang``'s row of its language table (no-op without a table).
    A language without a row: an error, or with ``strict=False`` no language embedding."""
    table = input_languages(model)
    if table is None:
        yield
        return
    if lang not in table.languages and strict:
        raise ValueError(f"language {lang!r} has no language embedding (the table has {list(table.languages)})")
    previous, table.current = table.current, table.languages.index(lang) if lang in table.languages else None
    try:
        yield
    finally:
        table.current = previous
