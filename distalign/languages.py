"""Language codes: the one normalisation every reader of a language code goes through.

Data sets name languages differently: BLI dictionaries and most corpora use ISO 639-1 (``de``), Tatoeba and
Multi-SimLex ISO 639-3 (``deu``), BabelNet exports upper case (``DE``), some the bibliographic 639-2 (``ger``) or a
macrolanguage member (``cmn`` for Mandarin, ``arb`` for Standard Arabic). A run compares codes to decide which
words are held out of training and which pairs belong together, so each code is read once into its canonical
form (``language_code``): ISO 639-1 where the language has one, else ISO 639-3, a macrolanguage's members as the
macrolanguage (``cmn`` -> ``zh``), a script subtag kept where it means something (``sr-Latn``, not ``en-Latn``),
a region dropped (``en-GB`` -> ``en``); a language's English name or its own (``German``, ``Deutsch``) is accepted
too. ``langcodes`` (with ``language_data`` for the names) holds the tables.

The synthetic world's languages (``x`` and one letter: ``xa``, ``xb``; no ISO 639-1 code has that form but Xhosa's
``xh``) are their own codes, as are ISO 639-3's private-use codes (``qaa``-``qtz``). Anything else unknown is a
``ConfigError`` naming the key or file it came from.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from typing import NewType

import langcodes
from langcodes.data_dicts import MACROLANGUAGES

from distalign.errors import ConfigError

SYNTHETIC_LANGUAGE = re.compile(r"x[a-z]")
# CLDR's aliases (which langcodes applies) replace Tagalog by Filipino and Serbo-Croatian by Serbian in Latin script;
# ISO 639, BabelNet and URIEL keep them apart (BabelBERT's language samples hold Tagalog): canonical, ISO 639-3
KEPT_APART = {"tl": ("tl", "tgl"), "tgl": ("tl", "tgl"), "sh": ("sh", "hbs"), "hbs": ("sh", "hbs")}
# The type of a config field holding a language code: the config loader reads its value through language_code,
# naming the field's dotted key in the error.
LanguageCode = NewType("LanguageCode", str)


def _synthetic(code: str) -> bool:
    return bool(SYNTHETIC_LANGUAGE.fullmatch(code)) and not langcodes.Language.get(code).is_valid()


def is_synthetic(code: str) -> bool:
    """Whether ``code`` is a language of the synthetic world (x + a letter), which no real language is."""
    return _synthetic(code)


@cache
def _canonical(code: str) -> str | None:
    if _synthetic(code):
        return code
    if code.lower() in KEPT_APART:
        return KEPT_APART[code.lower()][0]
    try:
        language = langcodes.Language.get(code)
    except (langcodes.LanguageTagError, ValueError):
        language = None
    if language is None or not language.language or not language.is_valid() or language.language == "und":
        try:
            language = langcodes.find(code)  # a language name; find also takes a name's prefix: only a whole one
        except LookupError:
            return None
        if code.casefold() not in (language.display_name().casefold(), language.autonym().casefold()):
            return None
    language = langcodes.Language.make(language=language.language, script=language.script)  # the region dropped
    return langcodes.standardize_tag(language.to_tag(), macro=True)


def language_code(code: str, where: str) -> str:
    """The canonical code of ``code`` (see the module docstring); an unknown one is a ``ConfigError`` naming
    ``where`` (a config key such as ``data.corpora[0].lang``, or a file and its column)."""
    canonical = _canonical(str(code).strip()) if str(code).strip() else None
    if canonical is None:
        raise ConfigError(
            f"{where}: {code!r} is not a language code (ISO 639-1 like 'de', ISO 639-3 like 'deu', or a "
            f"language name like 'German'; the synthetic world's languages are x + a letter, like 'xa')"
        )
    return canonical


def iso639_3(code: str, where: str) -> str:
    """The ISO 639-3 code of a language (``de`` -> ``deu``), as typology tables and ISO 639-3 file names want it;
    a synthetic language keeps its own code."""
    canonical = language_code(code, where)
    if _synthetic(canonical):
        return canonical
    if canonical in KEPT_APART:
        return KEPT_APART[canonical][1]
    return langcodes.Language.get(canonical).to_alpha3()


def code_in_data(code: str, available: Iterable[str], where: str, data: str) -> str:
    """The one of ``available`` (the codes a data set names its files by, lower case, e.g. Tatoeba's ``deu``,
    ``cmn``, ``arz``) that is the language ``code``: ``code`` itself where the data set has it; else the data set's
    code of the same canonical language, its ISO 639-3 code first (``de``, ``German`` -> ``deu``; ``ar`` -> ``ara``,
    not Egyptian ``arz``), else the only one there is (``zh`` -> ``cmn``, ``fa`` -> ``pes``); else the only member
    of the macrolanguage ``code`` names whose own ISO 639-1 code keeps it apart (``no`` -> ``nob`` where the data set
    has no ``nno``). Anything else is a ``ConfigError`` naming ``where`` and listing what ``data`` (its name and
    folder, for the message) holds."""
    available = sorted(set(available))
    holds = f"{data} holds: {', '.join(available) or 'nothing'}"
    given = str(code).strip().lower()
    if given in available:
        return given
    try:
        canonical = language_code(code, where)
    except ConfigError as err:
        raise ConfigError(f"{err}; {holds}") from None
    same = [other for other in available if _canonical(other) == canonical] or [
        other for other in available if MACROLANGUAGES.get(_canonical(other) or "") == canonical
    ]  # no: nob, nno
    alpha3 = iso639_3(canonical, where)
    if alpha3 in same:
        return alpha3
    if len(same) == 1:
        return same[0]
    if same:
        raise ConfigError(
            f"{where}: {code!r} (language {canonical}) is in {data} under several codes "
            f"({', '.join(same)}): give one of them"
        )
    raise ConfigError(f"{where}: no data for {code!r} (language {canonical}, ISO 639-3 {alpha3}); {holds}")
