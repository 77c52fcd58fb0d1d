"""The headless ACP client: a script (or `talaria run --acp`, `talaria demo`) as the editor.

Public API: `AcpClient` and the permission policies `allow_all`, `reject_all`,
`ask_on_terminal`. May import the ACP door's transport (`talaria.acp_server.jsonrpc`) and the
tools' local file helpers; never the agent layer.
"""

from talaria.acp_server.client.core import AcpClient, Write, allow_all, ask_on_terminal, reject_all

__all__ = ["AcpClient", "Write", "allow_all", "ask_on_terminal", "reject_all"]
