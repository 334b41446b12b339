"""The plain PyTorch training script a user would write instead of ``distalign train`` on the quickstart: the
real-run anchor of ``distalign bench perf``.

The same tiny model (the run's cached directory), corpus files and constraint pairs; one ``DataLoader``
worker process tokenises each step's sentences and pairs, and ``DataCollatorForLanguageModeling`` masks
the sentences (padded to the longest in the batch, single subwords masked); MLM + BabelBERT's InfoNCE
(``BareObjectives``), AdamW, clipping; one torch thread, as a Ray Train worker of one CPU gets.

    python -m distalign.bench.plain_script MODEL_DIR CONSTRAINTS.parquet CORPUS.txt... --steps 300
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import pyarrow.parquet as pq
import torch


class StepRows(torch.utils.data.Dataset):
    """Step ``i``'s raw rows: ``sentences`` corpus sentences and ``pairs`` constraint pairs, drawn at random."""

    def __init__(self, sentences: list[str], pairs: dict[str, list], per_step: tuple[int, int], steps: int, seed: int):
        self.sentences, self.pairs, self.per_step, self.steps, self.seed = sentences, pairs, per_step, steps, seed

    def __len__(self) -> int:
        return self.steps

    def __getitem__(self, index: int) -> tuple[list[str], dict[str, list]]:
        rng = np.random.default_rng((self.seed, index))
        sentences = [self.sentences[i] for i in rng.choice(len(self.sentences), self.per_step[0], replace=False)]
        rows = rng.choice(len(self.pairs["word1"]), self.per_step[1], replace=False)
        return sentences, {key: [values[i] for i in rows] for key, values in self.pairs.items()}


class Collate:
    """Tokenise (and mask) one step's rows in the DataLoader's worker process."""

    def __init__(self, tokenizer, max_length: int, word_tokens: int, mask_prob: float):
        from transformers import DataCollatorForLanguageModeling

        self.tokenizer, self.max_length, self.word_tokens = tokenizer, max_length, word_tokens
        self.masking = DataCollatorForLanguageModeling(tokenizer, mlm_probability=mask_prob, return_tensors="pt")

    def __call__(self, step: tuple[list[str], dict[str, list]]) -> dict[str, dict[str, torch.Tensor]]:
        sentences, pairs = step
        encoded = self.tokenizer(sentences, truncation=True, max_length=self.max_length)
        masked = self.masking([{"input_ids": ids, "attention_mask": mask}
                               for ids, mask in zip(encoded["input_ids"], encoded["attention_mask"])])
        corpus = {"masked_ids": masked["input_ids"], "labels": masked["labels"], "attention_mask": masked["attention_mask"]}
        # both sides in one call: one padded width, as the loss encodes them together
        words = self.tokenizer(pairs["word1"] + pairs["word2"], truncation=True, max_length=self.word_tokens,
                               padding=True, return_special_tokens_mask=True, return_tensors="pt")
        words["word_mask"] = words["attention_mask"] * (1 - words["special_tokens_mask"])
        constraints = {"synset": torch.tensor(pairs["synset_index"])}
        for side, half in (("1", slice(None, len(pairs["word1"]))), ("2", slice(len(pairs["word1"]), None))):
            constraints |= {f"{key}{side}": words[key][half] for key in ("input_ids", "attention_mask", "word_mask")}
        return {"corpus": corpus, "constraints": constraints}


def train(model_dir: str, constraints: str, corpus: list[str], steps: int, sentences_per_step: int = 16,
          pairs_per_step: int = 32, lr: float = 1e-3, temperature: float = 0.07, max_length: int = 64,
          word_tokens: int = 16, mask_prob: float = 0.15, seed: int = 0) -> list[float]:
    """Train ``steps`` steps; returns each step's wall time in seconds (data wait included)."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from distalign.bench.bare_loop import BareObjectives, bare_step

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = BareObjectives(AutoModelForMaskedLM.from_pretrained(model_dir), temperature).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    sentences = [line.strip() for path in corpus for line in open(path, encoding="utf-8") if line.strip()]
    pairs = pq.read_table(constraints, columns=["word1", "word2", "synset_index"]).to_pydict()
    rows = StepRows(sentences, pairs, (sentences_per_step, pairs_per_step), steps, seed)
    loader = torch.utils.data.DataLoader(rows, batch_size=None, num_workers=1,
                                         collate_fn=Collate(tokenizer, max_length, word_tokens, mask_prob))
    times = []
    start = time.perf_counter()
    for batches in loader:
        bare_step(model, optimizer, batches)
        now = time.perf_counter()
        times.append(now - start)
        start = now
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir")
    parser.add_argument("constraints", help="the constraint pairs as parquet (word1, word2, synset_index)")
    parser.add_argument("corpus", nargs="+", help="text files, a sentence a line")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--sentences-per-step", type=int, default=16)
    parser.add_argument("--pairs-per-step", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--max-length", type=int, default=64, help="subwords of a sentence at most")
    parser.add_argument("--word-tokens", type=int, default=16, help="subwords of an encoded word at most")
    args = parser.parse_args()
    print(json.dumps(train(args.model_dir, args.constraints, args.corpus, args.steps, args.sentences_per_step,
                           args.pairs_per_step, args.lr, max_length=args.max_length, word_tokens=args.word_tokens)))


if __name__ == "__main__":
    main()
