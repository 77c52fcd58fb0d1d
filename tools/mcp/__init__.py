"""MCP servers as tools: from the editor (ACP `mcpServers`) and from config.toml, through the
official `mcp` SDK.

    settings.py    ServerSpec, where servers come from, every bound
    schema.py      tool names and input schemas made safe for OpenAI and Anthropic
    stdio.py       the stdio transport (tracked process groups, stderr kept)
    connection.py  one server's life: start, handshake, list, calls, end
    specs.py       the ToolSpecs of a ready server (+ the resource tools)
    results.py     CallToolResult / resources as capped result dicts
    manager.py     McpManager: a session's servers on their own thread, a ToolSource

Imports the `mcp` SDK (lazily, on the MCP thread), `talaria.tools` (registry, errors, procs)
and `talaria.tools.web.spill`; nothing from `talaria.agent` or `talaria.acp_server`.
"""
