"""Logging for Talaria: `$TALARIA_HOME/logs/talaria.log` keeps the detail, stderr is for people.

In ACP mode stdout carries the protocol, and stderr reaches the person: Zed shows it in its agent
log, Emacs' agent-shell turns every chunk of it into an error notice in the user's shell (issue
17). So by default stderr gets only what someone should act on, warnings and errors, one line
each (`talaria: warning: ...`, tracebacks stay in the file); INFO and DEBUG, the libraries' own
loggers included (httpx logs every model request at INFO), go to the file only.
`TALARIA_LOG_LEVEL` lowers the stderr level for debugging (and the file's, below INFO).
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
from pathlib import Path

LOG_FILE_BYTES = 1024 * 1024
LOG_FILE_BACKUPS = 3
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
STDERR_LEVEL = logging.WARNING
"""What reaches stderr unless TALARIA_LOG_LEVEL says otherwise."""
FILE_LEVEL = logging.INFO


class OneLine(logging.Formatter):
    """`talaria: warning: first line of the message`; a traceback is left to the log file."""

    def __init__(self, log_file: Path | None) -> None:
        super().__init__()
        self.log_file = log_file

    def format(self, record: logging.LogRecord) -> str:
        lines = record.getMessage().strip().splitlines()
        text = lines[0] if lines else record.name
        if (record.exc_info or len(lines) > 1) and self.log_file is not None:
            text += f" (details in {self.log_file})"
        return f"talaria: {record.levelname.lower()}: {text}"


def setup_logging(home: Path, level: str | int | None = None) -> Path | None:
    """Log to `home/logs/talaria.log` (INFO and up) and stderr (`level`, default WARNING).

    Returns the file's path, or None when the log directory cannot be created (then only
    stderr's level is kept). Safe to call twice: it replaces its own handlers.
    """
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "_talaria", False)]:
        root.removeHandler(handler)
        handler.close()
    stderr_level = STDERR_LEVEL if level is None else _level(level)
    file_level = min(FILE_LEVEL, stderr_level)
    wanted = Path(home) / "logs" / "talaria.log"
    path: Path | None = wanted
    handlers: list[logging.Handler] = []
    try:
        wanted.parent.mkdir(parents=True, exist_ok=True)
        file_handler = logging.handlers.RotatingFileHandler(
            wanted, maxBytes=LOG_FILE_BYTES, backupCount=LOG_FILE_BACKUPS, encoding="utf-8"
        )
        file_handler.setFormatter(logging.Formatter(FORMAT))
        file_handler.setLevel(file_level)
        handlers.append(file_handler)
    except OSError as exc:
        print(f"talaria: warning: cannot write logs to {wanted}: {exc}; only warnings and errors "
              "are kept (on stderr)", file=sys.stderr)
        path = None
    stderr = logging.StreamHandler(sys.stderr)
    # Asked-for detail (INFO, DEBUG) is for debugging: times and logger names help there.
    stderr.setFormatter(OneLine(path) if stderr_level > logging.INFO else logging.Formatter(FORMAT))
    stderr.setLevel(stderr_level)
    handlers.append(stderr)
    for handler in handlers:
        handler._talaria = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    root.setLevel(min(file_level, stderr_level))
    logging.captureWarnings(True)
    return path


def _level(level: str | int) -> int:
    if isinstance(level, int):
        return level
    value = logging.getLevelName(level.strip().upper())
    if not isinstance(value, int):
        raise ValueError(f"unknown log level {level!r}: use DEBUG, INFO, WARNING or ERROR")
    return value
