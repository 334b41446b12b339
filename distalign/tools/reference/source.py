"""What the reference reads from the source code itself: the comments that document config fields, and the
messages of the checks that validate them.

A field's description is the comment block right above it plus the comment at the end of its line, as the
schema writes them::

    # Ray placement of the workers: PACK (fill nodes), SPREAD, STRICT_PACK, STRICT_SPREAD (one per node)
    placement_strategy: Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"] = "PACK"
    zero_stage: int = 0  # DeepSpeed ZeRO stage 0-3

A check is a ``require(condition, "<dotted key>", "<message>")`` call or a ``ConfigError("<key>: <message>")``;
inside an objective plugin the key may be ``f"{key}.<field>"`` (``key``: the plugin's section).
"""

from __future__ import annotations

import ast
import inspect
import io
import textwrap
import tokenize
from functools import cache
from types import ModuleType


def _comment_text(token: str) -> str:
    return token.lstrip("#").strip()


@cache
def field_comments(cls: type) -> dict[str, str]:
    """Field name -> its comment (the block above it, then its line's own), for the fields of class ``cls``."""
    source = textwrap.dedent(inspect.getsource(cls))
    lines = source.splitlines()
    comments: dict[int, str] = {}  # line number -> the comment on it
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string
    (classdef,) = ast.parse(source).body
    out: dict[str, str] = {}
    for node in classdef.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        above: list[str] = []
        row = node.lineno - 1
        while row >= 1 and lines[row - 1].lstrip().startswith("#"):
            above.insert(0, _comment_text(comments[row]))
            row -= 1
        own = [
            _comment_text(comments[r])
            for r in range(node.lineno, node.end_lineno + 1)
            if r in comments and not lines[r - 1].lstrip().startswith("#")
        ]
        text = "; ".join(part for part in (" ".join(above), " ".join(own)) if part)
        if text:
            out[node.target.id] = text
    return out


@cache
def class_docstring(cls: type) -> str:
    """The docstring written in ``cls`` itself (not the signature a dataclass makes up without one)."""
    (classdef,) = ast.parse(textwrap.dedent(inspect.getsource(cls))).body
    return inspect.cleandoc(ast.get_docstring(classdef) or "")


def _render(node: ast.expr, names: dict[str, str]) -> str | None:
    """A string constant or f-string as text: ``{name}`` of ``names`` filled in, any other ``{...}`` as "…";
    None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if not isinstance(node, ast.JoinedStr):
        return None
    parts = []
    for value in node.values:
        if isinstance(value, ast.Constant):
            parts.append(str(value.value))
        elif isinstance(value.value, ast.Name) and value.value.id in names:
            parts.append(names[value.value.id])
        else:
            parts.append("…")
    return "".join(parts)


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


@cache
def _checks_of_module(module: ModuleType, key: str) -> tuple[tuple[str, str], ...]:
    pairs = []
    names = {"key": key} if key else {}
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if not isinstance(node, ast.Call):
            continue
        name = _call_name(node)
        if name == "require" and len(node.args) == 3:
            where, message = _render(node.args[1], names), _render(node.args[2], names)
            if where is not None and message is not None and "…" not in where:
                pairs.append((where, message))
        elif name == "ConfigError" and node.args:
            text = _render(node.args[0], {})
            if text and ": " in text and "…" not in text.split(": ", 1)[0]:
                pairs.append(tuple(text.split(": ", 1)))
    return tuple(pairs)


def checks(modules: list[tuple[ModuleType, str]]) -> dict[str, list[str]]:
    """Dotted key -> the messages of the checks on it, in the order of ``(module, section key)`` and the source;
    a message that starts with a value only known at run time is left out (it reads as a fragment)."""
    out: dict[str, list[str]] = {}
    for module, key in modules:
        for where, message in _checks_of_module(module, key):
            if message.startswith("…"):
                continue
            if message not in out.setdefault(where, []):
                out[where].append(message)
    return out
