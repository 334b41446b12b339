"""``docs/reference/cli.md``: every ``distalign`` command and sub-command with every argument, read from the
argparse parser the console script builds (``distalign.cli.build_parser``)."""

from __future__ import annotations

import argparse

from distalign.cli import build_parser
from distalign.tools.reference import markdown as md

USAGE_WIDTH = 100  # usage lines wrap here, whatever the terminal that generates the page
INTRO = """\
# Command line

{generated}

The `distalign` command is installed with the package (`pip install -e .`, `make quickstart`);
`distalign COMMAND --help` prints what this page shows. A command that reads a config takes dotted
`key=value` overrides after it ([configuration keys](config.md)).
"""


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.HelpFormatter(prog, width=USAGE_WIDTH)


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = _formatter(parser.prog)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return formatter.format_help().strip()


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser, str]]:
    """(name, parser, help) of each sub-command of ``parser``, in the order they were added."""
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            out += [(name, sub, helps.get(name, "")) for name, sub in action.choices.items()]
    return out


def _default(action: argparse.Action) -> str:
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        return "off"
    if action.default in (None, argparse.SUPPRESS) or action.default == [] or not action.option_strings:
        return ""
    return md.code(action.default)


def _meaning(action: argparse.Action, formatter: argparse.HelpFormatter) -> str:
    notes = []
    if action.required and action.option_strings:
        notes.append("Required.")
    if action.choices is not None and action.metavar is not None:  # else the invocation shows them
        notes.append("One of " + ", ".join(md.code(c) for c in action.choices) + ".")
    help_text = md.text(formatter._expand_help(action)) if action.help else ""
    if help_text and notes and not help_text.endswith("."):
        help_text += "."
    return " ".join([help_text, *notes]).strip()


def _invocation(action: argparse.Action, formatter: argparse.HelpFormatter) -> str:
    """``--top-k TOP_K``, ``-h, --help``; a positional with how many values it takes (``[overrides ...]``)."""
    if action.option_strings:
        return f"`{formatter._format_action_invocation(action)}`"
    return f"`{formatter._format_args(action, action.dest)}`"


def _arguments_table(actions: list[argparse.Action], prog: str) -> str:
    formatter = _formatter(prog)
    rows = [
        (_invocation(action, formatter), _default(action), _meaning(action, formatter))
        for action in actions
        if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))
        and action.help != argparse.SUPPRESS
    ]
    return md.table(("Argument", "Default", "Meaning"), rows) if rows else ""


def _command(parser: argparse.ArgumentParser, about: str) -> list[str]:
    out = [f"## `{parser.prog}` {{#{_slug(parser.prog)}}}", f"```text\n{_usage(parser)}\n```"]
    if (
        parser.description
        and isinstance(parser.formatter_class, type)
        and issubclass(parser.formatter_class, argparse.RawDescriptionHelpFormatter)
    ):
        out.append(f"```text\n{parser.description.strip()}\n```")
    elif parser.description or about:
        out.append(md.text(parser.description or about))
    standard = {"positional arguments", "options", "optional arguments"}
    own = [a for group in parser._action_groups if group.title in standard for a in group._group_actions]
    if table := _arguments_table(own, parser.prog):
        out.append(table)
    for group in parser._action_groups:
        if group.title in standard or not group._group_actions:
            continue
        out.append(
            f"**{md.text(group.title or '')}**" + (f": {md.text(group.description)}" if group.description else "")
        )
        out.append(_arguments_table(group._group_actions, parser.prog))
    subs = _subcommands(parser)
    if subs:
        rows = [(f"[`{sub.prog}`](#{_slug(sub.prog)})", md.text(help_text)) for _, sub, help_text in subs]
        out.append(md.table(("Command", "What it does"), rows))
    for _, sub, help_text in subs:
        out += _command(sub, help_text)
    return out


def _slug(prog: str) -> str:
    return prog.replace(" ", "-")


def render() -> str:
    parser = build_parser()
    parts = [INTRO.format(generated=md.GENERATED.format(source="the parser of distalign/cli.py"))]
    parts += _command(parser, "")
    return "\n\n".join(parts) + "\n"
