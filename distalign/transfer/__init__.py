"""Zero-shot cross-lingual transfer: fine-tune an encoder on a labelled task in a source language, test it
unchanged on other languages (XTREME's protocol, Hu et al. 2020).

- ``tasks/``: one plugin class per task family (sentence-pair and token classification), its tasks
  (XNLI, PAWS-X, WikiANN NER, UD POS) with their hyper-parameters' source, and ``registry.py``;
- ``data.py``: the labelled data, read and checked on the driver (Hub name, ``save_to_disk`` folder,
  plain files) before any Ray work;
- ``finetune.py``: the Ray Train worker (DDP) that fine-tunes, selects the epoch on the dev set and
  scores every test language;
- ``protocol.py``: mean ± std over seeds, per-language scores, their average and Δ to the source;
- ``runner.py``: ``distalign transfer``: one TorchTrainer run per (task, seed), fanned out; MLflow.
"""
