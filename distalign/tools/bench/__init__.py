"""The performance and hardware benchmarks (``distalign bench perf|streaming|memory|scale|startup``, set up in
``cli.py``); the synthetic-language benchmark, a research feature, is ``distalign.synthetic_languages``."""
