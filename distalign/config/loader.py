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
    if dataclasses.is_dataclass(hint):
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
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return value
    raise ConfigError(f"{key}: unsupported type {hint}")


def from_dict(cls: type, data: dict[str, Any], prefix: str = "") -> Any:
    """Build dataclass ``cls`` from a nested dict, checking keys and types; errors name the dotted key.

    The keys are the constructor's arguments (fields with ``init=False`` are state, not configuration).
    """
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    for key in data:
        if key not in names:
            where = f"{prefix}.{key}" if prefix else key
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
    node[parts[-1]] = yaml.safe_load(raw)


def read_mapping(path: str | os.PathLike) -> dict[str, Any]:
    """A YAML file whose top level is a mapping (an empty file is an empty mapping)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        loaded = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from err
    if loaded is not None and not isinstance(loaded, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    return loaded or {}


def load_dataclass(cls: type, path: str | os.PathLike | None = None, overrides: list[str] | None = None) -> Any:
    """Build dataclass ``cls`` from a YAML file and dotted ``key=value`` overrides (applied in order).

    The loader of every configuration file (experiment configs, Tune studies, evaluation specs):
    unknown keys and wrong types are errors that name the dotted key.
    """
    data = read_mapping(path) if path is not None else {}
    for override in overrides or []:
        apply_override(data, override, cls)
    return from_dict(cls, data)
