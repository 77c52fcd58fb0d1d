"""Talaria's exceptions in one tree, and the one place where each becomes what a person or a
model sees. Defined here, in the lowest layer, so every layer can subclass `TalariaError`.

    TalariaError                 base of the errors Talaria raises on purpose
    ├── ToolError                a tool call cannot be done: the model sees it as the result
    │   ├── WorkspaceError       a file or command failed (binary, too large, not a file, the
    │   │                        editor refused or did not answer)               [here]
    │   ├── KernelError          execute_code's interpreter could not start     [here]
    │   ├── EnvError             an execution environment cannot start, is misconfigured,
    │   │                        or its connection dropped (talaria.tools.environments) [here]
    │   ├── SandboxError         no sandbox tier can confine the child as asked [here]
    │   ├── WebError             a page cannot be fetched or read (blocked address, too
    │   │                        large, bad content type); per URL in web_extract [here]
    │   ├── VisionError          vision_analyze cannot read an image (not an image, corrupt,
    │   │                        too large) or its vision model failed          [here]
    │   └── McpError             an MCP server cannot answer (not running, crashed,
    │                            timed out)                                     [here]
    ├── ProviderError            a model call failed; its classified tree (auth, rate limit,
    │                            overflow, ...) is drawn in talaria.agent.providers.errors
    └── PeerError                the other end of a JSON-RPC connection gave no answer
        ├── RequestTimeout       (also a TimeoutError)        talaria.acp_server.jsonrpc
        └── ConnectionClosed

    RpcError (talaria.acp_server.jsonrpc) is not in the tree: it is an error's wire form,
    raised by ACP handlers to answer with it, and raised by `Peer.request` for an error answer.

Where each is converted (nowhere else):
    ToolError, OSError  -> `{"error": message}` tool result: talaria.agent.tool_runner.execute
    ProviderError       -> `ModelFailure` (auth, setup, message, data): talaria.agent.host,
                           which every door turns into its own form: a JSON-RPC error
                           (`RpcError.from_model`), an LSP RequestFailed, `talaria run`'s exit
                           status, a batch task's failed record
    PeerError, RpcError from the editor -> WorkspaceError: talaria.acp_server.editor_workspace
    SandboxError        -> KernelError: talaria.tools.execute_code.kernel (the kernel's start)
    WebError            -> that URL's `error` in web_extract's results: talaria.tools.web.pages
"""

from __future__ import annotations


class TalariaError(Exception):
    """Base of every error Talaria raises on purpose."""


class ToolError(TalariaError):
    """A tool call cannot be done; the message is what the model reads as the call's error."""


class WorkspaceError(ToolError):
    """A workspace operation failed in a way the model should see (binary, too large...)."""


class KernelError(ToolError):
    """execute_code's kernel could not be started (no interpreter, sandbox failure...)."""


class EnvError(WorkspaceError):
    """An execution environment (container, SSH host, cloud sandbox) cannot be used: unknown
    name, missing engine or SDK, image not found, host unreachable, connection dropped. The
    message is one line: the cause and what to do."""


class SandboxError(ToolError):
    """A forced tier is not available here, or the spec is unusable (missing writable dir)."""


class WebError(ToolError):
    """A web page cannot be fetched or read; web_extract reports it for that URL only."""


class VisionError(ToolError):
    """vision_analyze cannot use an image (not an image, corrupt, too large, nowhere to read
    it from) or the auxiliary vision model could not describe it."""


class McpError(ToolError):
    """An MCP server cannot answer a call (not running, crashed mid-call, timed out)."""
