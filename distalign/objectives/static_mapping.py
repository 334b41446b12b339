"""How a language's static space is mapped onto another (``distalign.static.mapping``), in a module of its own: the
objective's config and ``distalign static align --method`` read it, the command line without loading torch."""

from __future__ import annotations

from typing import Literal

# orthogonal Procrustes, or VecMap (Artetxe et al. 2018), the static-contextual paper's choice
StaticMapping = Literal["procrustes", "vecmap"]
