"""Progress lines and warnings: every module logs to ``logging.getLogger("distalign")``.

``configure()`` gives that logger one stream handler ("[distalign] message") the first time it is
called in a process; it does not propagate to the root logger, so a line is printed once.
"""

from __future__ import annotations

import logging
import sys

LOGGER_NAME = "distalign"


def configure(level: int = logging.INFO) -> logging.Logger:
    logger = logging.getLogger(LOGGER_NAME)
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("[distalign] %(levelname_prefix)s%(message)s"))
        handler.addFilter(_LevelPrefix())
        logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = False
    return logger


class _LevelPrefix(logging.Filter):
    """Warnings and errors say so; progress lines carry no level."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.levelname_prefix = "" if record.levelno < logging.WARNING else f"{record.levelname} "
        return True
