"""The Arrow schema of lexical constraints: one row per word pair that should be close."""

import pyarrow as pa

# Word, language and synset columns must be non-empty; readers count rows that are not.
CONSTRAINT_SCHEMA = pa.schema(
    [
        pa.field("word1", pa.string()),
        pa.field("lang1", pa.string()),
        pa.field("word2", pa.string()),
        pa.field("lang2", pa.string()),
        # Pairs sharing a synset_id are all positives of each other in the lexical InfoNCE.
        pa.field("synset_id", pa.string()),
        pa.field("gloss1", pa.string()),
        pa.field("gloss2", pa.string()),
    ]
)
REQUIRED_COLUMNS = ("word1", "lang1", "word2", "lang2", "synset_id")
