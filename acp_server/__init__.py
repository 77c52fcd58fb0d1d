"""Front doors: how editors, scripts and people reach the agent.

    server.py, door.py, jsonrpc.py, wire.py, params.py, content.py, updates.py, history.py,
    editor_workspace.py, stdio.py, logs.py, sandbox_probe.py, version.py
                   the ACP door (`talaria acp`): JSON-RPC on stdio, sessions, updates
    client/        the headless ACP client (a script, `talaria run --acp`, the demo as editor)
    cli/           the `talaria` command

May import `talaria.agent` and `talaria.tools` (never the other way). The ACP modules import
neither `cli` nor `client`; `client` imports no agent code (it is an editor). Contracts:
pyproject.toml [tool.importlinter].
"""
