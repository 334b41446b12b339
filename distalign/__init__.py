"""distalign: Ray-distributed cross-lingual alignment of multilingual encoders."""
