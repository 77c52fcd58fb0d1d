"""Background processes: `terminal(background=true)` starts them, the `process` tool manages them.

`base.py` the `Background` handle every workspace returns and `ProcessLog` (output: a tail in
memory, everything up to a bound in a file); `table.py` a session's `ProcessTable` (ids, caps,
watchers, notices, cleanup); `local.py` processes of this machine. The editor's terminals
(`talaria.acp_server.editor_processes`) and the environment helper
(`talaria.tools.environments.background`) implement `Background` too.

Imports: the standard library, anyio, `talaria.tools` (procs, errors, stopping); never the
agent or a front door.
"""
