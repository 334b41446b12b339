"""The batch contract's unit: a named tensor with its dtype and shape.

Each stream lists the tensors its batches carry (``distalign.data.streams``); an objective that
transforms a stream on the data side (masking) declares the tensors it adds in
``Objective.prepares``, and the names it reads in ``Objective.consumes``.
``tests/data/test_batch_contract.py`` checks every objective's reads against the streams' lists and
the lists against what the pipeline really makes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: str  # numpy dtype name
    shape: str  # "B", "B,T" or "B,D"
    doc: str = ""

    def check(self, array: np.ndarray, stream: str) -> None:
        """Raise if ``array`` does not have this spec's dtype and rank."""
        rank = len(self.shape.split(","))
        if array.dtype != np.dtype(self.dtype) or array.ndim != rank:
            raise TypeError(f"stream '{stream}', tensor '{self.name}': expected {self.dtype}[{self.shape}], got "
                            f"{array.dtype} with {array.ndim} dimensions")
