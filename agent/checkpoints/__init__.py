"""Checkpoints and undo: the project's files before each turn's first change, in a shadow git
repository under `$TALARIA_HOME/checkpoints/<project hash>/` (the project's own `.git` is never
touched). `TurnCheckpoints` (turns.py) takes them; `restore.py` puts files back (`/undo`,
`/restore N`, `talaria checkpoints restore N`); `shadow.py` is the git plumbing; `journal.py`
the list of checkpoints and the pre-images of files written through the editor.
Imports only `talaria.tools` (errors), the Session type and the standard library; the loop,
the tool runner and the commands import it, never the other way.
"""

from __future__ import annotations

from talaria.agent.checkpoints.journal import Checkpoint, Journal
from talaria.agent.checkpoints.shadow import CheckpointError, ShadowRepo, checkpoints_dir
from talaria.agent.checkpoints.turns import NestedCheckpoints, TurnCheckpoints

__all__ = ["Checkpoint", "CheckpointError", "Journal", "NestedCheckpoints", "ShadowRepo",
           "TurnCheckpoints", "checkpoints_dir"]
