"""Driver-side run preparation, before any Ray resources are taken: inputs read, validated and
sampled (``inputs``) into what the run gets (``prepared``), the offline tiny model and derived static targets
built, inputs staged for other nodes (``staging``), the tables written to the run's storage (``table_rows``), and
the streams the workers read (``ray_streams``)."""
