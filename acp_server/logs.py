"""Logging for Talaria: stderr and `$TALARIA_HOME/logs/talaria.log`, never stdout.

In ACP mode stdout carries the protocol, so a log line there breaks the editor's parser. Editors
show an agent's stderr in their logs panel; the file keeps a small rotating history for bug
reports.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
from pathlib import Path

LOG_FILE_BYTES = 1024 * 1024
LOG_FILE_BACKUPS = 3
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def setup_logging(home: Path, level: str | int = "INFO") -> Path | None:
    """Send the root logger to stderr and to `home/logs/talaria.log`; return the file's path.

    Safe to call twice (replaces its own handlers). If the log directory cannot be created,
    logs go to stderr only and None is returned.
    """
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "_talaria", False)]:
        root.removeHandler(handler)
        handler.close()
    formatter = logging.Formatter(FORMAT)
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    path: Path | None = Path(home) / "logs" / "talaria.log"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(
            logging.handlers.RotatingFileHandler(
                path, maxBytes=LOG_FILE_BYTES, backupCount=LOG_FILE_BACKUPS, encoding="utf-8"
            )
        )
    except OSError as exc:
        print(f"talaria: cannot write logs to {path}: {exc}", file=sys.stderr)
        path = None
    for handler in handlers:
        handler.setFormatter(formatter)
        handler._talaria = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    logging.captureWarnings(True)
    return path
