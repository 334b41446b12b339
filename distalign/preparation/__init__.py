"""Driver-side run preparation, before any Ray resources are taken: inputs read, validated and
sampled (``inputs``), the offline tiny model and derived static targets built, and the Ray Data
streams the workers read (``streams``)."""
