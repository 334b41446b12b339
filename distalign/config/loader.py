"""A generic typed-YAML loader: plain dicts (YAML, dotted ``key=value`` overrides) -> dataclasses.

Unknown keys and wrong types are errors that name the dotted key. It knows nothing of experiments:
the loader of experiment configs, Tune studies and evaluation specs alike. A type that builds itself
from a config value (a registry of sections) has a ``from_config_value(value, key)`` classmethod.
"""

from __future__ import annotations

import dataclasses
import os
import re
import types
import typing
from pathlib import Path
from typing import Any, Literal

import yaml

from distalign.errors import ConfigError
from distalign.languages import LanguageCode, language_code

_FLOAT_RE = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")


def coerce(value: Any, hint: Any, key: str) -> Any:
    origin = typing.get_origin(hint)
    if hint is Any:
        return value
    if isinstance(hint, type) and hasattr(hint, "from_config_value"):  # a section that builds itself
        return hint.from_config_value(value, key)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {type(value).__name__} {value!r}")
        return from_dict(hint, value, key)
    if origin is Literal:
        allowed = typing.get_args(hint)
        if value not in allowed:
            raise ConfigError(f"{key}: {value!r} is not one of {list(allowed)}")
        return value
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{key}: expected a list, got {type(value).__name__} {value!r}")
        (item_hint,) = typing.get_args(hint)
        return [coerce(v, item_hint, f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is tuple:  # tuple[X, ...] or a fixed tuple[A, B]; a YAML list either way
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {type(value).__name__} {value!r}")
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            args = (args[0],) * len(value)
        elif len(value) != len(args):
            raise ConfigError(f"{key}: expected a list of {len(args)} items, got {value!r}")
        return tuple(coerce(v, a, f"{key}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {type(value).__name__} {value!r}")
        key_hint, value_hint = typing.get_args(hint)
        return {coerce(k, key_hint, key): coerce(v, value_hint, f"{key}.{k}") for k, v in value.items()}
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if len(args) != 2 or type(None) not in args:
            raise ConfigError(f"{key}: only optional (X | None) unions are supported in configs")
        if value is None:
            return None
        return coerce(value, next(a for a in args if a is not type(None)), key)
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true/false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        return value
    if hint is float:
        # PyYAML (YAML 1.1) reads 1e-4 (no dot) as a string; accept such numeric strings.
        if isinstance(value, str) and _FLOAT_RE.fullmatch(value.strip()):
            return float(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        return float(value)
    if hint is LanguageCode:
        return language_code(coerce(value, str, key), key)
    if hint is str:
        if isinstance(value, bool):  # YAML 1.1: an unquoted no (Norwegian), yes, on, off is a boolean
            raise ConfigError(
                f"{key}: expected a string, got {str(value).lower()}: YAML reads unquoted yes/no/on/off "
                f"as true/false; write the word in quotes (e.g. lang: 'no' for Norwegian)"
            )
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return value
    raise ConfigError(f"{key}: unsupported type {hint}")


# Keys of earlier versions, and the keys that took their place: a config that still has one fails naming the new key
RENAMED_KEYS = {
    f"train.{old}_batch_size": f"train.batch_sizes.{stream}"
    for old, stream in (
        ("constraint", "constraints"),
        ("corpus", "corpus"),
        ("static", "static"),
        ("parallel", "parallel"),
    )
}


def from_dict(cls: type, data: dict[str, Any], prefix: str = "") -> Any:
    """Build dataclass ``cls`` from a nested dict, checking keys and types; errors name the dotted key.

    The keys are the constructor's arguments (fields with ``init=False`` are state, not configuration).
    """
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    for key in data:
        if key not in names:
            where = f"{prefix}.{key}" if prefix else key
            if where in RENAMED_KEYS:
                raise ConfigError(f"{where} is now {RENAMED_KEYS[where]}: write that key instead")
            raise ConfigError(f"unknown key '{where}' (allowed here: {', '.join(sorted(names))})")
    kwargs = {}
    for name, value in data.items():
        where = f"{prefix}.{name}" if prefix else name
        kwargs[name] = coerce(value, hints[name], where)
    return cls(**kwargs)


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            out.update(flatten(v, key))
        else:
            out[key] = v
    return out


def parse_override_value(key: str, raw: str) -> Any:
    """The value of override ``key=raw`` read as YAML, its constructs checked as a file's are (the override named)."""
    try:
        node = yaml.compose(raw, Loader=yaml.SafeLoader)
        value = yaml.safe_load(raw)
    except yaml.YAMLError as err:
        raise ConfigError(f"override {key}: not valid YAML: {err}") from err
    if node is None:  # key= with nothing after it
        raise ConfigError(f"override {key}: has no value: give one ({key}=VALUE), or write {key}=null to mean none")
    try:
        check_constructs(node, f"override {key}", key)
    except ConfigError as err:  # one line, one key: the line number adds nothing
        raise ConfigError(re.sub(r"^override (\S+):1: \1", r"override \1", str(err))) from None
    return value


def apply_override(data: dict[str, Any], override: str, cls: type | None = None) -> None:
    """Apply ``a.b.c=value`` (value parsed as YAML) to a nested dict in place.

    With the dataclass ``cls`` the dict will build, the rest of the key after a mapping-typed field
    is one key of that mapping: ``grid.train.lr=[1e-3]`` sets ``grid["train.lr"]``.
    """
    if "=" not in override:
        raise ConfigError(f"override {override!r} is not of the form key.sub=value")
    key, raw = override.split("=", 1)
    parts = key.strip().split(".")
    hint: Any = cls
    for i, part in enumerate(parts):
        if typing.get_origin(hint) is dict:
            parts = parts[:i] + [".".join(parts[i:])]
            break
        if not dataclasses.is_dataclass(hint):
            break
        hint = typing.get_type_hints(hint).get(part)  # None for an unknown key: from_dict names it
    node = data
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {key}: '{part}' is not a section")
    node[parts[-1]] = parse_override_value(key.strip(), raw)


# Plain (unquoted) scalars YAML 1.1, PyYAML's dialect, reads in a way no config author means: a leading-zero number
# is octal (010 is 8), digits with colons are base 60 (1:30 is 90), and NaN is no setting's value.
_OCTAL_RE = re.compile(r"[-+]?0[0-9_]+")
_BASE_60_RE = re.compile(r"[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?")
_NAN_RE = re.compile(r"\.(nan|NaN|NAN)")


def _scalar_problem(node: yaml.ScalarNode) -> str | None:
    """What is wrong with a scalar a person cannot have meant as YAML reads it; None when it is fine."""
    if node.style is not None:  # quoted or a block scalar: read as written
        return None
    text = node.value
    if text == "" and node.tag == "tag:yaml.org,2002:null":
        return "has no value (YAML reads an empty value as null): give a value, or write null to mean none"
    if _OCTAL_RE.fullmatch(text):
        return (
            f"{text} has a leading zero, which YAML 1.1 reads as an octal number ({yaml.safe_load(text)}): "
            f"write it without the zero, or in quotes for the text '{text}'"
        )
    if _BASE_60_RE.fullmatch(text):
        return (
            f"{text} is a base-60 number to YAML 1.1 ({yaml.safe_load(text)}): write the number, or quote it "
            f"for the text '{text}'"
        )
    if _NAN_RE.fullmatch(text):
        return f"{text} (not a number) is no setting's value"
    return None


def check_constructs(node: yaml.Node, where: str, key: str = "", lines: dict[str, int] | None = None) -> None:
    """Raise ``ConfigError("<where>:<line>: <key>: ...")`` for the first construct of a composed YAML document that
    YAML accepts and a person cannot have meant: a key given twice in one mapping (YAML keeps the last silently),
    two keys differing only in case or surrounding spaces, an empty value, an octal- or base-60-looking number, NaN.
    ``where``: the file (or the override) the node was read from; ``lines`` gets the line of every dotted key."""

    def fail(at: yaml.Node, dotted: str, problem: str) -> None:
        raise ConfigError(f"{where}:{at.start_mark.line + 1}: {dotted or 'the top level'}: {problem}")

    if lines is not None and key:
        lines.setdefault(key, node.start_mark.line + 1)  # a mapping's key: the line of the key itself (below)
    if isinstance(node, yaml.ScalarNode):
        if (problem := _scalar_problem(node)) is not None:
            fail(node, key, problem)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            check_constructs(item, where, f"{key}[{i}]", lines)
    elif isinstance(node, yaml.MappingNode):
        seen: dict[str, yaml.Node] = {}
        for key_node, value_node in node.value:
            name = str(key_node.value)
            dotted = f"{key}.{name}" if key else name
            twin = seen.get(name.strip().casefold())
            if twin is not None:
                same = "given twice" if twin.value == name else f"and '{twin.value}' differ only in case or spaces"
                fail(
                    key_node,
                    dotted,
                    f"{same} in one mapping (line {twin.start_mark.line + 1} too): YAML would "
                    "keep one silently; keep the one you mean",
                )
            seen[name.strip().casefold()] = key_node
            if lines is not None:
                lines[dotted] = key_node.start_mark.line + 1
            check_constructs(value_node, where, dotted, lines)


def parse_yaml(text: str, where: str, lines: dict[str, int] | None = None) -> Any:
    """``text`` read as YAML (``yaml.safe_load``) after ``check_constructs``; a ``ConfigError`` naming ``where``."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        if node is not None:
            check_constructs(node, where, lines=lines)
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{where}: not valid YAML: {err}") from err


def read_mapping(path: str | os.PathLike, lines: dict[str, int] | None = None) -> dict[str, Any]:
    """A YAML file whose top level is a mapping (an empty file is an empty mapping); constructs no one means
    (``check_constructs``) are errors naming the file, line and key. ``lines`` gets each dotted key's line."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    loaded = parse_yaml(path.read_text(), str(path), lines)
    if loaded is not None and not isinstance(loaded, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    return loaded or {}


def load_dataclass(cls: type, path: str | os.PathLike | None = None, overrides: list[str] | None = None) -> Any:
    """Build dataclass ``cls`` from a YAML file and dotted ``key=value`` overrides (applied in order).

    The loader of every configuration file (experiment configs, Tune studies, evaluation specs):
    unknown keys and wrong types are errors that name the dotted key.
    """
    lines: dict[str, int] = {}
    data = read_mapping(path, lines) if path is not None else {}
    for override in overrides or []:
        apply_override(data, override, cls)
    try:
        return from_dict(cls, data)
    except ConfigError as err:
        raise located(err, path, lines, overrides or []) from None


_ERROR_KEY_RE = re.compile(r"^unknown key '([^']+)'|^([\w.\[\]-]+):")


def located(
    err: ConfigError, path: str | os.PathLike | None, lines: dict[str, int], overrides: list[str]
) -> ConfigError:
    """``err`` with ``<file>:<line>: `` in front when the key it names was set in the file (not by an override)."""
    match = _ERROR_KEY_RE.match(str(err))
    key = match and (match.group(1) or match.group(2))
    overridden = [o.split("=", 1)[0].strip() for o in overrides]
    if not key or key not in lines or any(key == o or key.startswith((f"{o}.", f"{o}[")) for o in overridden):
        return err
    return ConfigError(f"{path}:{lines[key]}: {err}")
