"""Progress lines and warnings: every module logs to ``logging.getLogger("distalign")``.

``configure()`` gives that logger one stream handler ("[distalign] message") the first time it is
called in a process; it does not propagate to the root logger, so a line is printed once.

``quiet_console(log_file)`` keeps the terminal to distalign's own lines while a ``train``, ``tune``, ``eval`` or
``transfer`` command runs: whatever else reaches ``sys.stdout``/``sys.stderr`` (Ray's and Tune's output, the worker
output Ray forwards, other libraries' log records, warnings) goes to a log file instead. distalign writes to the
terminal through its logger, ``console()`` or ``say``. ``progress(...)`` is the progress bar of long non-training work.
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TextIO, TypeVar

LOGGER_NAME = "distalign"
PREFIX = "[distalign]"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# how Ray prefixes a line it forwards from a worker process: "(RayTrainWorker pid=123, ip=10.0.0.2) ...", "(raylet) "
RAY_WORKER_PREFIX = re.compile(r"^\([^()]*\)\s")
TOKEN_AUTH_NOTICE = "Token authentication is enabled"
TOKEN_AUTH_LINE = (
    f"{PREFIX} Ray token authentication is on for this cluster (Ray's default; RAY_AUTH_MODE=disabled turns it off)"
)
T = TypeVar("T")
_terminal: TextIO | None = None  # the terminal while quiet_console routes sys.stdout and sys.stderr away


def console() -> TextIO:
    """Where distalign's own output goes: the terminal, even while ``quiet_console`` routes the standard streams."""
    return _terminal or sys.stdout


def say(line: str) -> None:
    """Print one of distalign's own lines (a command's progress, its result tables) to ``console()``."""
    print(line, file=console())


def configure(level: int = logging.INFO) -> logging.Logger:
    logger = logging.getLogger(LOGGER_NAME)
    if not logger.handlers:
        handler = _StdoutHandler()
        handler.setFormatter(logging.Formatter(f"{PREFIX} %(levelname_prefix)s%(message)s"))
        handler.addFilter(_LevelPrefix())
        logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = False
    return logger


class _StdoutHandler(logging.StreamHandler):
    """Writes to ``console()`` as it is when a line is logged (a test's capture of ``sys.stdout``, the terminal
    under ``quiet_console``), not to the stream of the moment the logger was configured."""

    @property
    def stream(self) -> TextIO:
        return console()

    @stream.setter
    def stream(self, _value) -> None:
        pass


class _LevelPrefix(logging.Filter):
    """Warnings and errors say so; progress lines carry no level."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.levelname_prefix = "" if record.levelno < logging.WARNING else f"{record.levelname} "
        return True


class ConsoleRouter:
    """Decides, line by line, what of the standard streams' output reaches the terminal; every line goes to the
    log file, without ANSI codes.

    Shown: the distalign lines Ray forwards from the worker processes, without Ray's prefix and colours
    (``worker_lines="all"``), or only their warnings and errors (``"warnings"``: a study, whose trials its
    progress lines stand for), and Ray's token-auth notice once, in distalign's words. Everything else the
    driver or the workers print stays in the log file.
    """

    def __init__(self, log: TextIO, terminal: TextIO, worker_lines: str = "all"):
        if worker_lines not in ("all", "warnings"):
            raise ValueError(f"worker_lines: 'all' or 'warnings', not {worker_lines!r}")
        self.log, self.terminal, self.worker_lines = log, terminal, worker_lines
        self._said_token_auth = False

    def route(self, line: str) -> None:
        plain = ANSI.sub("", line)
        self.log.write(plain + "\n")
        self.log.flush()
        shown = self._shown(plain)
        if shown is not None:
            self.terminal.write(shown + "\n")
            self.terminal.flush()

    def _shown(self, plain: str) -> str | None:
        worker = RAY_WORKER_PREFIX.match(plain)
        if worker:
            message = plain[worker.end() :]
            if not message.startswith(PREFIX):
                return None
            level = message[len(PREFIX) :].split(maxsplit=1)[:1]
            return message if self.worker_lines == "all" or level in (["WARNING"], ["ERROR"]) else None
        if TOKEN_AUTH_NOTICE in plain:
            if self._said_token_auth:
                return None
            self._said_token_auth = True
            return TOKEN_AUTH_LINE
        return None


class _RoutedStream(io.TextIOBase):
    """A ``sys.stdout``/``sys.stderr`` stand-in that hands whole lines to the router (a carriage return ends a
    line too: progress bars redraw with it). It is no terminal, so libraries print no colour codes to it."""

    def __init__(self, router: ConsoleRouter, encoding: str):
        self.router, self._encoding = router, encoding
        self._pending = ""

    @property
    def encoding(self) -> str:
        return self._encoding

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        self._pending += text
        *lines, self._pending = re.split(r"\r\n|\r|\n", self._pending)
        for line in lines:
            self.router.route(line)
        return len(text)

    def flush(self) -> None:
        pass

    def close_line(self) -> None:
        if self._pending:
            self.router.route(self._pending)
            self._pending = ""


@contextlib.contextmanager
def quiet_console(log_file: Path, worker_lines: str = "all") -> Iterator[Path]:
    """Route ``sys.stdout``/``sys.stderr``, and the logging stream handlers bound to them, through a
    ``ConsoleRouter`` until the block ends."""
    global _terminal
    configure()
    log_file.parent.mkdir(parents=True, exist_ok=True)
    terminal = sys.stdout
    logging.getLogger(LOGGER_NAME).info("Ray's and the libraries' output: %s", log_file)
    with open(log_file, "a", encoding="utf-8") as log:
        router = ConsoleRouter(log, terminal, worker_lines)
        out = _RoutedStream(router, getattr(terminal, "encoding", "utf-8") or "utf-8")
        err = _RoutedStream(router, out.encoding)
        saved_streams = sys.stdout, sys.stderr
        rebound = _rebind_handlers([(sys.stdout, out), (sys.stderr, err), (sys.__stdout__, out), (sys.__stderr__, err)])
        sys.stdout, sys.stderr, _terminal = out, err, terminal
        try:
            yield log_file
        finally:
            out.close_line()
            err.close_line()
            sys.stdout, sys.stderr = saved_streams
            _terminal = None
            for handler, stream in rebound:
                handler.setStream(stream)


def _rebind_handlers(targets: list[tuple[TextIO, TextIO]]) -> list[tuple[logging.StreamHandler, TextIO]]:
    """Point the stream handlers of other libraries' loggers (bound to the console when they were made) at the
    routed streams; returns what to restore."""
    loggers = [logging.getLogger()] + [logging.getLogger(name) for name in list(logging.Logger.manager.loggerDict)]
    rebound = []
    for logger in loggers:
        for handler in logger.handlers:
            # Ray's handler is a StreamHandler bound to the stderr of its import; handlers whose stream is a
            # property (logging's _StderrHandler, distalign's) follow the current stream by themselves
            if not isinstance(handler, logging.StreamHandler) or isinstance(
                getattr(type(handler), "stream", None), property
            ):
                continue
            routed = next((new for old, new in targets if handler.stream is old), None)
            if routed is not None:
                rebound.append((handler, handler.setStream(routed)))
    return rebound


def duration(seconds: float) -> str:
    """``m:ss``, or ``h:mm:ss`` from an hour on (an ETA, a trial's wall time)."""
    minutes, seconds = divmod(int(round(seconds)), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{seconds:02d}" if minutes >= 60 else f"{minutes}:{seconds:02d}"


def progress(items: Iterable[T], total: int | None = None, description: str = "") -> Iterable[T]:
    """A progress bar over ``items`` on the terminal's standard error, for long work outside training (mining,
    extraction, evaluation, preparation); none when that is not a terminal (a log file, a job's output)."""
    terminal = sys.__stderr__
    if terminal is None or not terminal.isatty():
        return items
    from tqdm import tqdm

    return tqdm(items, total=total, desc=description, file=terminal, leave=False, dynamic_ncols=True, mininterval=0.5)
