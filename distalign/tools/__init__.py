"""Tools beside the library: they import it, nothing in it imports them (an import-linter contract in pyproject.toml).

- ``bench``: the performance and hardware benchmarks (``distalign bench perf|streaming|memory|scale|startup``)
- ``gpu_check``: runs distalign's GPU paths on a GPU machine and writes one report
  (``python -m distalign.tools.gpu_check``)
- ``reference``: the docs' generated reference pages (``python -m distalign.tools.reference``)
"""
