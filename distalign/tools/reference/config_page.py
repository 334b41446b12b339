"""``docs/reference/config.md``: every key of a training config and of a study file, from the typed schema.

Types, defaults and allowed values come from the dataclasses; meanings from the comments at their fields
(``source.field_comments``); the checks from the ``require`` calls that validate them (``source.checks``).
"""

from __future__ import annotations

import dataclasses
import importlib
import types
import typing
from collections.abc import Iterator
from typing import Any, Literal

from distalign.config import ExperimentConfig, ObjectivesConfig, schema
from distalign.data import stream_plugins
from distalign.objectives.registry import OBJECTIVES
from distalign.studies import study
from distalign.studies.study import StudyConfig
from distalign.tools.reference import markdown as md
from distalign.tools.reference.source import checks, class_docstring, field_comments

INTRO = """\
# Configuration keys

{generated}

A training config is a YAML file of the sections below (`distalign train CONFIG`, `jobs/train.py --config`);
any key can also be given on the command line as a dotted override, `train.lr=1e-4`, applied after the file.
An unknown key, a value of the wrong type or one outside the allowed values is an error naming the dotted key,
raised before Ray starts. A relative path is looked up in the working directory first, then beside the config
file (the first place where it exists; in neither, the working directory's is the one an error names): the
shipped configs name paths from the repository root, and a config kept beside its own files works from anywhere.
Link to a key as `reference/config.md#train.lr`.
"""

ENTRY_TITLES = {
    "CorpusSource": "corpus entries",
    "DictionarySource": "dictionary entries",
    "StaticVectorsSource": "static-vector entries",
    "ParallelSource": "parallel-sentence entries",
}


@dataclasses.dataclass
class Section:
    key: str  # dotted, "" for the top level of a study file
    cls: type
    about: str = ""


def _is_section(hint: Any) -> bool:
    return dataclasses.is_dataclass(hint) or hint is ObjectivesConfig


def _sections(key: str, cls: type) -> Iterator[Section]:
    """``cls`` at ``key`` and every section nested in it, depth first; ``objectives`` as one section per plugin."""
    yield Section(key, cls, class_docstring(cls))
    for name, hint in _init_hints(cls).items():
        if hint is ObjectivesConfig:
            for objective, plugin in OBJECTIVES.items():
                yield Section(
                    f"objectives.{objective}",
                    plugin.Config,
                    f"The `{objective}` objective ({plugin.reference}); active when its weight is > 0.",
                )
        elif isinstance(hint, type) and dataclasses.is_dataclass(hint):
            yield from _sections(f"{key}.{name}" if key else name, hint)


def _init_hints(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.init}


def _entry_class(hint: Any) -> type | None:
    """The dataclass of a list of entries (``list[CorpusSource]``), else None."""
    if typing.get_origin(hint) is list and dataclasses.is_dataclass(typing.get_args(hint)[0]):
        return typing.get_args(hint)[0]
    return None


def _type(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return "any"
    if origin is Literal:
        return " or ".join(md.code(a) for a in args)
    if origin is list:
        entry = _entry_class(hint)
        if entry is not None:
            return f"list of [{ENTRY_TITLES[entry.__name__]}](#{entry.__name__})"
        return f"list of {_type(args[0])}"
    if origin is tuple:
        return f"list of {_type(args[0])}"
    if origin is dict:
        return f"mapping {_type(args[0])} → {_type(args[1])}"
    if origin in (typing.Union, types.UnionType):
        return " or ".join("null" if a is type(None) else _type(a) for a in args)
    return hint.__name__


def _default(f: dataclasses.Field) -> object:
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory()  # type: ignore[operator]


def _rows(section: Section, checked: dict[str, list[str]], anchor_prefix: str) -> list[tuple[str, str, str, str]]:
    comments = field_comments(section.cls)
    hints = _init_hints(section.cls)
    rows = []
    for f in dataclasses.fields(section.cls):
        if not f.init or _is_section(hints[f.name]):
            continue
        key = f"{section.key}.{f.name}" if section.key else f.name
        meaning = md.text(comments.get(f.name, ""))
        if key in checked:
            meaning += "<br>" + md.text("Checked: " + "; ".join(checked[key]) + ".")
        rows.append(
            (
                f"{md.anchor(anchor_prefix + key)}`{key}`",
                _type(hints[f.name]),
                md.code(_default(f)),
                meaning.removeprefix("<br>"),
            )
        )
    return rows


def _render_sections(
    sections: list[Section], checked: dict[str, list[str]], anchor_prefix: str, level: str
) -> list[str]:
    out = []
    for section in sections:
        rows = _rows(section, checked, anchor_prefix)
        if not rows:
            continue
        title = f"`{section.key}`" if section.key else "Top level"
        out.append(f"{level} {title}")
        if section.about:
            out.append(md.text(section.about))
        out.append(md.table(("Key", "Type", "Default", "Meaning"), rows))
    return out


def _entry_sections(sections: list[Section]) -> list[str]:
    """One table per kind of list entry (``data.corpora`` items ...), naming the keys that hold it."""
    users: dict[type, list[str]] = {}
    for section in sections:
        for name, hint in _init_hints(section.cls).items():
            entry = _entry_class(hint)
            if entry is not None:
                users.setdefault(entry, []).append(f"`{section.key}.{name}`")
    out = []
    for entry, keys in users.items():
        comments, hints = field_comments(entry), _init_hints(entry)
        rows = [
            (f"`{f.name}`", _type(hints[f.name]), md.code(_default(f)), md.text(comments.get(f.name, "")))
            for f in dataclasses.fields(entry)
            if f.init
        ]
        out.append(f"### {ENTRY_TITLES[entry.__name__].capitalize()} {{#{entry.__name__}}}")
        out.append(
            " ".join(filter(None, [md.text(class_docstring(entry)), f"Items of {', '.join(keys)}, each a mapping of:"]))
        )
        out.append(md.table(("Key", "Type", "Default", "Meaning"), rows))
    return out


def render() -> str:
    experiment = list(_sections("", ExperimentConfig))[1:]  # its own fields are all sections
    study_sections = list(_sections("", StudyConfig))
    modules = [(schema, ""), (stream_plugins, ""), (study, "")]
    modules += [(importlib.import_module(p.__module__), f"objectives.{name}") for name, p in OBJECTIVES.items()]
    checked = checks(modules)
    parts = [INTRO.format(generated=md.GENERATED.format(source="distalign/config/ and the objective plugins"))]
    parts += ["## Training config"]
    parts += _render_sections(experiment, checked, "", "###")
    parts += ["## List entries", "The keys that take a list of files take mappings of these keys."]
    parts += _entry_sections(experiment)
    parts += [
        "## Study files",
        md.text(
            "A study file (`distalign tune STUDY`, `tuning/*.yaml`) names a base training config and "
            "what its trials vary; a key given as an override on the command line (`max_concurrent_trials=2`, "
            "`grid.train.lr=[1e-3,3e-4]`) overrides the study file, any other key every trial's config. "
            "Link to a key as `reference/config.md#study.metric`."
        ),
    ]
    parts += _render_sections(study_sections, checked, "study.", "###")
    return "\n\n".join(parts) + "\n"
