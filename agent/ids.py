"""Session ids. Imports only `os`: an editor's `session/new` makes one before the session
machinery is loaded."""

from __future__ import annotations

import os


def new_session_id() -> str:
    # uuid4().hex, without `uuid`'s import (it loads `platform`): 1 ms of `session/new`
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # RFC 4122 variant
    return raw.hex()
