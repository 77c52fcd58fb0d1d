"""`talaria lsp`: the Language Server Protocol door, on pygls 2 and lsprotocol.

A second front door over the same agent core as `acp_server/` (no agent logic here): editors
without an ACP client (Helix, Kakoune, Sublime LSP, plain VS Code, Neovim and Emacs with their
built-in LSP clients) reach Talaria through `workspace/executeCommand` and code actions.
`server.py` (features), `commands.py` (commands), `prompts.py` (arguments -> prompts, code
actions), `sessions.py` (the agent side of a request), `door.py` (events -> `talaria/update`,
permissions), `documents.py` (the Workspace over open documents), `edits.py` (text edits),
`transcript.py` (markdown transcript), `frames.py` (the bounded, resyncing frame reader
all of stdin goes through), `protocol.py` (every message checked before pygls acts on it:
shapes, lifecycle, no tracebacks), `main.py` (start-up).

May import the agent and the tools; never the CLI or the headless client.
"""
