"""The plain PyTorch training script a user would write instead of ``distalign train`` on the quickstart: the
real-run anchor of ``distalign bench perf``.

The same tiny model (the run's cached directory), corpus files and constraint pairs; one ``DataLoader``
worker process tokenises each step's sentences and pairs, and ``DataCollatorForLanguageModeling`` masks
the sentences (padded to the longest in the batch, single subwords masked); MLM + BabelBERT's InfoNCE
(``BareObjectives``), AdamW, clipping; one torch thread, as a Ray Train worker of one CPU gets. With
``--processes 2``: two ``DistributedDataParallel`` processes (gloo), each with its own ``DataLoader``
worker drawing its own rows, the InfoNCE negatives gathered from both.

    python -m distalign.tools.bench.plain_script MODEL_DIR CONSTRAINTS.parquet CORPUS.txt... --steps 300

It prints, as JSON, each step's wall time (rank 0's) and the CPU time its processes (every rank and
``DataLoader`` worker) spent from the end of step ``--steady-from`` to the end of the last step.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import numpy as np
import psutil
import pyarrow.parquet as pq
import torch
import torch.distributed as dist


def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user and system) of process ``pid`` and of its live descendants."""
    root = psutil.Process(pid)
    total = 0.0
    for process in [root, *root.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:  # ended since the listing
            continue
        total += times.user + times.system
    return total


class StepRows(torch.utils.data.Dataset):
    """Step ``i``'s raw rows: ``sentences`` corpus sentences and ``pairs`` constraint pairs, drawn at random
    (each rank its own: ``seed`` holds the rank)."""

    def __init__(
        self, sentences: list[str], pairs: dict[str, list], per_step: tuple[int, int], steps: int, seed: tuple[int, int]
    ):
        self.sentences, self.pairs, self.per_step, self.steps, self.seed = sentences, pairs, per_step, steps, seed

    def __len__(self) -> int:
        return self.steps

    def __getitem__(self, index: int) -> tuple[list[str], dict[str, list]]:
        rng = np.random.default_rng((*self.seed, index))
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
        masked = self.masking(
            [
                {"input_ids": ids, "attention_mask": mask}
                for ids, mask in zip(encoded["input_ids"], encoded["attention_mask"])
            ]
        )
        corpus = {
            "masked_ids": masked["input_ids"],
            "labels": masked["labels"],
            "attention_mask": masked["attention_mask"],
        }
        # both sides in one call: one padded width, as the loss encodes them together
        words = self.tokenizer(
            pairs["word1"] + pairs["word2"],
            truncation=True,
            max_length=self.word_tokens,
            padding=True,
            return_special_tokens_mask=True,
            return_tensors="pt",
        )
        words["word_mask"] = words["attention_mask"] * (1 - words["special_tokens_mask"])
        constraints = {"synset": torch.tensor(pairs["synset_index"])}  # host-side: a DataLoader collate
        for side, half in (("1", slice(None, len(pairs["word1"]))), ("2", slice(len(pairs["word1"]), None))):
            constraints |= {f"{key}{side}": words[key][half] for key in ("input_ids", "attention_mask", "word_mask")}
        return {"corpus": corpus, "constraints": constraints}


def train(
    model_dir: str,
    constraints: str,
    corpus: list[str],
    steps: int,
    sentences_per_step: int = 16,
    pairs_per_step: int = 32,
    lr: float = 1e-3,
    temperature: float = 0.07,
    max_length: int = 64,
    word_tokens: int = 16,
    mask_prob: float = 0.15,
    seed: int = 0,
    steady_from: int = 0,
    cpu_of: int | None = None,
) -> dict:
    """Train ``steps`` steps in this process (a rank of the process group, if one is initialised); returns each
    step's wall time in seconds (data wait included) and ``cpu_s``: the CPU time of process ``cpu_of``'s tree
    (default this process's) from the end of step ``steady_from`` to the end of the last step."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from distalign.tools.bench.bare_loop import BareObjectives, bare_step

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    rank = dist.get_rank() if dist.is_initialized() else 0
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = BareObjectives(AutoModelForMaskedLM.from_pretrained(model_dir), temperature).train()
    if dist.is_initialized():
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    sentences = [line.strip() for path in corpus for line in open(path, encoding="utf-8") if line.strip()]
    pairs = pq.read_table(constraints, columns=["word1", "word2", "synset_index"]).to_pydict()
    rows = StepRows(sentences, pairs, (sentences_per_step, pairs_per_step), steps, (seed, rank))
    loader = torch.utils.data.DataLoader(
        rows, batch_size=None, num_workers=1, collate_fn=Collate(tokenizer, max_length, word_tokens, mask_prob)
    )
    cpu_of = cpu_of or os.getpid()
    times, cpu = [], 0.0
    start = time.perf_counter()
    for step, batches in enumerate(loader, 1):
        bare_step(model, optimizer, batches)
        now = time.perf_counter()
        times.append(now - start)
        start = now
        if step in (steady_from, steps):  # the DataLoader worker is alive until the loop ends
            cpu = tree_cpu_s(cpu_of) - cpu
    return {"step_s": times, "cpu_s": cpu}


def _rank(rank: int, world: int, scratch: str, kwargs: dict) -> None:
    dist.init_process_group("gloo", init_method=f"file://{scratch}/init", rank=rank, world_size=world)
    try:
        result = train(**kwargs, cpu_of=os.getppid())  # the launching process: every rank and DataLoader worker
        if rank == 0:
            print(json.dumps(result), flush=True)
    finally:
        dist.destroy_process_group()


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
    parser.add_argument("--steady-from", type=int, default=0, help="the CPU time counts the steps after this one")
    parser.add_argument("--processes", type=int, default=1, help="DistributedDataParallel processes (gloo)")
    args = parser.parse_args()
    kwargs = {
        "model_dir": args.model_dir,
        "constraints": args.constraints,
        "corpus": args.corpus,
        "steps": args.steps,
        "sentences_per_step": args.sentences_per_step,
        "pairs_per_step": args.pairs_per_step,
        "lr": args.lr,
        "max_length": args.max_length,
        "word_tokens": args.word_tokens,
        "steady_from": args.steady_from,
    }
    if args.processes == 1:
        print(json.dumps(train(**kwargs)))
        return
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as scratch:
        mp.spawn(_rank, args=(args.processes, scratch, kwargs), nprocs=args.processes, join=True)


if __name__ == "__main__":
    main()
