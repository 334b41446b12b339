"""The command line's defaults are those of the dataclasses and functions its flags fill: a flag either leaves its
value to the spec (default None: the spec's default applies) or repeats a default that must stay equal to the
target's. No Ray, no model: the parser and signatures alone (about a second)."""

from __future__ import annotations

import argparse
import dataclasses
import inspect

import pytest

from distalign.cli import build_parser
from distalign.data.mining import mine_babelnet
from distalign.data.omw import mine_omw
from distalign.eval.checkpoint_eval import flag_overrides
from distalign.static.mapping import align_files
from distalign.static.x2static import extract_static_vectors
from distalign.synthetic_languages.benchmark import BenchSpec
from distalign.tools.bench.perf import run_perf_bench


def subcommand(path: tuple[str, ...]) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in path:
        choices = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
        parser = choices[name]
    return parser


def target_defaults(target) -> dict:
    """A dataclass's field defaults or a function's parameter defaults, by name."""
    if dataclasses.is_dataclass(target):
        return {
            f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
            for f in dataclasses.fields(target)
            if (f.default, f.default_factory) != (dataclasses.MISSING,) * 2
        }
    return {
        name: p.default
        for name, p in inspect.signature(target).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


def as_target_value(value, default):
    """The flag's default as the handler hands it on: ``a,b`` to a tuple where the target takes a tuple."""
    if isinstance(default, tuple) and isinstance(value, str):
        return tuple(v for v in value.split(",") if v)
    if isinstance(default, tuple) and isinstance(value, list):
        return tuple(value)
    return value


# command -> (what its handler fills, {flag dest: the target's name where they differ}, flags with a default of their
# own that fill nothing there: the handler's, said here so that a new flag is either checked or listed)
FILLED = {
    ("bench", "synthetic"): (BenchSpec, {}, {"preset", "preset_overrides", "overrides"}),
    ("static", "extract"): (extract_static_vectors, {}, set()),
    ("static", "align"): (align_files, {}, {"tgt_out"}),  # "" on the command line, None in the function
    ("mine-constraints",): (mine_omw, {"exclude": "exclude_paths"}, {"stopwords"}),
    ("bench", "perf"): (run_perf_bench, {"rows": "areas"}, {"output_dir", "no_mlflow"}),
}


def own_defaults(parser: argparse.ArgumentParser) -> dict:
    """The options with a default of their own (not None, not argparse's help or a store_true's False)."""
    return {
        a.dest: a.default
        for a in parser._actions
        if a.default not in (None, argparse.SUPPRESS, False) and a.dest not in ("func", "help")
    }


@pytest.mark.parametrize("path", list(FILLED), ids=" ".join)
def test_a_flag_default_equals_the_default_of_what_it_fills(path):
    target, renamed, handler_only = FILLED[path]
    parser = subcommand(path)
    defaults = {dest: value for dest, value in own_defaults(parser).items() if dest not in handler_only}
    expected = target_defaults(target)
    unmatched = sorted(dest for dest in defaults if renamed.get(dest, dest) not in expected)
    assert not unmatched, f"distalign {' '.join(path)}: flags with a default that {target.__name__} has no default for"
    drift = {
        dest: (value, expected[renamed.get(dest, dest)])
        for dest, value in defaults.items()
        if as_target_value(value, expected[renamed.get(dest, dest)]) != expected[renamed.get(dest, dest)]
    }
    assert not drift, f"distalign {' '.join(path)}: flag default != {target.__name__}'s (flag, target): {drift}"


def test_both_miners_share_the_mining_defaults():
    """mine-constraints runs mine_omw or mine_babelnet by its source: one set of defaults checked for both."""
    assert target_defaults(mine_omw) == target_defaults(mine_babelnet)


def test_eval_and_transfer_flags_leave_the_spec_defaults_alone():
    """Every flag of `distalign eval` and `distalign transfer` defaults to None, so an omitted flag overrides
    nothing and the spec's dataclass default is the only one (the help text reads it from there)."""
    for path in (("eval",), ("transfer",)):
        assert own_defaults(subcommand(path)) == {}, f"distalign {path[0]}"
    assert flag_overrides(build_parser().parse_args(["eval"])) == []
