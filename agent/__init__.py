"""The agent: the live path (loop, tool runner, session, door, options, commands, permissions,
events, prompt, config, store; `context/` tokens and compaction; `providers/`) and its
offline wing (`trajectories/`: export, compress, batch, HTML views).

May import `talaria.tools`, never a front door (`talaria.acp_server`): it knows nothing of
JSON-RPC and talks to the user only through a session's `FrontDoor`. The live path never
imports `trajectories/`.
"""
