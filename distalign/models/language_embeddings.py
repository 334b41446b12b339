"""Language embeddings at the input and a target-language-conditioned MLM head (DICT-MLM).

Paper: Chaudhary, Raman, Srinivasan & Chen (2020), "DICT-MLM: Improved Multilingual Pre-Training
using Bilingual Dictionaries". A masked word's label may be a synonym in *another* language, so
the model is told which language it reads and which language it must predict:

    input:   x_t = E_word[id_t] + E_lang_in[lang_t]                 (then the encoder as usual)
    output:  logits_t = W_dec · LN(gelu(W [h_t ; E_lang_out[target_lang_t]] + b)) + b_dec

The paper couples the two language tables (§2.3: "coupling the two help[s] improve performance
slightly and is thus the setup we use"): ``E_lang_out = E_lang_in`` by default; separate tables
are an option.

Both exist only during pre-training: they live in the DICT-MLM objective module, not in the
Hugging Face model, so the exported model keeps its original embeddings and MLM head.

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

import torch
import torch.nn.functional as F
from torch import nn


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


def pretrained_lm_head(masked_lm: nn.Module) -> nn.Module:
    """The whole MLM head (transform and decoder: hidden states -> vocabulary logits) of an XLM-R/RoBERTa or
    BERT masked LM."""
    if hasattr(masked_lm, "lm_head"):
        return masked_lm.lm_head
    if hasattr(masked_lm, "cls"):
        return masked_lm.cls
    raise ValueError(f"masked_lm: no known MLM head in {type(masked_lm).__name__} (expected lm_head or cls)")


def pretrained_lm_transform(masked_lm: nn.Module) -> tuple[nn.Linear, nn.LayerNorm]:
    """The (dense, layer norm) of the pretrained MLM head of an XLM-R/RoBERTa or BERT masked LM."""
    head = pretrained_lm_head(masked_lm)
    if hasattr(head, "predictions"):  # BERT's cls.predictions.transform
        return head.predictions.transform.dense, head.predictions.transform.LayerNorm
    return head.dense, head.layer_norm


class LanguageConditionedLMHead(nn.Module):
    """``LN(gelu(W [h ; E_lang_out[target]] + b))`` then the model's decoder (see module docstring)."""

    def __init__(self, hidden_size: int, num_languages: int, lang_dim: int | None = None,
                 layer_norm_eps: float = 1e-5, init_std: float = 0.02, own_table: bool = True):
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
            raise ValueError(f"dense: expected weight [{self.hidden_size}, {self.hidden_size}], "
                             f"got {list(dense.weight.shape)}")
        self.dense.weight.zero_()
        self.dense.weight[:, : self.hidden_size].copy_(dense.weight)
        self.dense.bias.copy_(dense.bias)
        self.layer_norm.load_state_dict(layer_norm.state_dict())

    def forward(self, states: torch.Tensor, target_lang_ids: torch.Tensor, decoder: nn.Module,
                language_table: nn.Embedding | None = None) -> torch.Tensor:
        """Logits [..., V] from token states [..., d] and the target language id of each token
        (looked up in the head's own table, or in ``language_table`` when the tables are coupled)."""
        table = self.target_language if self.target_language is not None else language_table
        if table is None:
            raise ValueError("a head without its own language table needs language_table")
        x = torch.cat([states, table(target_lang_ids).to(states.dtype)], dim=-1)
        return decoder(self.layer_norm(F.gelu(self.dense(x))))
