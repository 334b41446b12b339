"""The synthetic-language benchmark (``distalign bench synthetic``): ALIGN-MLM's controlled setting, a language aligned
with a transformed copy of itself (transliteration, inversion, permutation, syntax), its transfer study and its Ray
Tune studies (``distalign tune`` on a study file with a ``bench:`` section)."""
