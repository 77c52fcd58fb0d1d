"""What `talaria lsp` answers to `initialize`, without pygls or lsprotocol.

Importing lsprotocol's types takes longer than the rest of start-up together, so `main.py`
answers `initialize` from here while pygls loads in a thread, then hands the same message to
pygls (whose own answer is dropped). `tests/lsp/test_lsp_startup.py` holds this answer equal to
the one pygls builds from the same parameters.
"""

from __future__ import annotations

from typing import Any

COMMANDS = ("talaria.ask", "talaria.fix", "talaria.explain", "talaria.cancel", "talaria.newSession")
CODE_ACTION_KINDS = ("quickfix", "refactor", "refactor.rewrite")
ENCODINGS = ("utf-8", "utf-16", "utf-32")
FULL = 1
"""TextDocumentSyncKind.Full: editors send whole documents (Talaria reads, never types)."""


def position_encoding(params: dict[str, Any]) -> str:
    """The client's first supported position encoding, else UTF-16 (pygls' rule)."""
    general = _get(params, "capabilities", "general") or {}
    for encoding in general.get("positionEncodings") or ():
        if encoding in ENCODINGS:
            return str(encoding)
    return "utf-16"


def initialize_result(params: dict[str, Any], version: str) -> dict[str, Any]:
    sync: dict[str, Any] = {"openClose": True, "change": FULL}
    if _get(params, "capabilities", "textDocument", "synchronization", "willSave"):
        sync["willSave"] = False
    if _get(params, "capabilities", "textDocument", "synchronization", "willSaveWaitUntil"):
        sync["willSaveWaitUntil"] = False
    sync["save"] = True
    return {
        "capabilities": {
            "positionEncoding": position_encoding(params),
            "textDocumentSync": sync,
            "codeActionProvider": {"codeActionKinds": list(CODE_ACTION_KINDS)},
            "executeCommandProvider": {"commands": list(COMMANDS)},
            "workspace": {"workspaceFolders": {"supported": True, "changeNotifications": True},
                          "fileOperations": {}},
        },
        "serverInfo": {"name": "talaria", "version": version},
    }


def _get(value: Any, *keys: str) -> Any:
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value
