"""A scripted LSP editor around one real `talaria lsp` process, on pytest-lsp's client.

    async with lsp_editor(tmp_path, fake_llm) as ed:          # VS Code's real capabilities
        uri = ed.open("a.py", "x = 1\\n")                       # didOpen (unsaved text)
        result = await ed.command("talaria.ask", "fix it", {"uri": uri, "range": ...})
        ed.buffers[uri], ed.updates, ed.edits, ed.questions, ed.client.progress_reports

The editor side does what an editor does with Talaria's requests: `workspace/applyEdit`
edits its buffers (a file not open is opened first, as VS Code does, and stays unsaved) and
sends `didChange`; `window/showMessageRequest` answers `answer`; `talaria/update`
notifications are collected. pytest-lsp checks every message against the capabilities.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
from lsprotocol import types
from pygls.protocol import default_converter
from pygls.uris import from_fs_path, to_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import register_lsp_features
from pytest_lsp.protocol import LanguageClientProtocol

from talaria.acp_server.lsp.edits import apply_edits
from tests.acp_harness import server_env

SERVER_CMD = [sys.executable, "-m", "talaria.acp_server", "lsp"]
TIMEOUT = 20.0
"""Seconds any single wait may take (the fake LLM is instant; the machine may be loaded)."""
VSCODE = "visual-studio-code"


class ClientProtocol(LanguageClientProtocol):
    """pytest-lsp's protocol, reading code action results as plain JSON: lsprotocol reads any
    item with a `command` key as a Command, so a CodeAction that carries one loses its kind
    and diagnostics (VS Code tells them apart by the type of `command`, as the spec says)."""

    def get_result_type(self, method: str) -> Any:
        if method == types.TEXT_DOCUMENT_CODE_ACTION:
            return None
        return super().get_result_type(method)


def make_client() -> LanguageClient:
    client = LanguageClient(protocol_cls=ClientProtocol, converter_factory=default_converter)
    register_lsp_features(client)
    return client


class LspEditor:
    def __init__(self, client: LanguageClient, root: Path, *, encoding: str = "utf-16") -> None:
        self.client = client
        self.root = root
        self.encoding = encoding
        self.buffers: dict[str, str] = {}
        """Open documents: uri -> text (what the user sees, saved or not)."""
        self.versions: dict[str, int] = {}
        self.updates: list[dict[str, Any]] = []
        """`talaria/update` params, in order."""
        self.edits: list[dict[str, Any]] = []
        """`workspace/applyEdit` params received, as JSON."""
        self.questions: list[dict[str, Any]] = []
        """`window/showMessageRequest` params received."""
        self.answer: str | Callable[[dict[str, Any]], str | None] | None = "Allow once"
        self.refuse_edits: str | None = None
        """When set, applyEdit answers `applied: false` with this reason."""

    # -- documents ----------------------------------------------------------------------------

    def uri(self, name: str | Path) -> str:
        return str(from_fs_path(str(self.root / name)))

    def open(self, name: str | Path, text: str | None = None) -> str:
        uri = self.uri(name)
        if text is None:
            text = (self.root / name).read_text(encoding="utf-8")
        self._did_open(uri, text)
        return uri

    def change(self, uri: str, text: str) -> None:
        self.buffers[uri] = text
        self.versions[uri] += 1
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))

    def save(self, uri: str) -> None:
        Path(str(to_fs_path(uri))).write_text(self.buffers[uri], encoding="utf-8")
        self.client.text_document_did_save(types.DidSaveTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))

    def close(self, uri: str) -> None:
        del self.buffers[uri], self.versions[uri]
        self.client.text_document_did_close(types.DidCloseTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))

    def _did_open(self, uri: str, text: str) -> None:
        self.buffers[uri] = text
        self.versions[uri] = 1
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))

    # -- requests -----------------------------------------------------------------------------

    async def command(self, name: str, *args: Any) -> Any:
        with anyio.fail_after(TIMEOUT):
            result = await self.client.workspace_execute_command_async(
                types.ExecuteCommandParams(command=name, arguments=list(args)))
        return json(self.client, result)

    async def code_actions(self, uri: str, range_: dict[str, Any],
                           diagnostics: list[dict[str, Any]] = ()) -> list[dict[str, Any]]:  # type: ignore[assignment]
        converter = self.client.protocol._converter
        params = converter.structure({
            "textDocument": {"uri": uri}, "range": range_,
            "context": {"diagnostics": list(diagnostics)},
        }, types.CodeActionParams)
        with anyio.fail_after(TIMEOUT):
            result = await self.client.text_document_code_action_async(params)
        return json(self.client, result) or []

    # -- what the editor does with Talaria's requests -------------------------------------------

    def apply(self, params: dict[str, Any]) -> dict[str, Any]:
        self.edits.append(params)
        if self.refuse_edits is not None:
            return {"applied": False, "failureReason": self.refuse_edits}
        edit = params["edit"]
        for uri, edits in (edit.get("changes") or {}).items():
            self._edit(uri, edits)
        for change in edit.get("documentChanges") or []:
            kind = change.get("kind")
            if kind == "create":
                if change["uri"] not in self.buffers:
                    self._did_open(change["uri"], "")
            elif kind is None:
                self._edit(change["textDocument"]["uri"], change["edits"])
            else:
                raise AssertionError(f"unexpected resource operation {change}")
        return {"applied": True}

    def _edit(self, uri: str, edits: list[dict[str, Any]]) -> None:
        if uri not in self.buffers:  # an editor opens the file to edit it (unsaved after)
            self._did_open(uri, Path(str(to_fs_path(uri))).read_text(encoding="utf-8"))
        self.change(uri, apply_edits(self.buffers[uri], edits, self.encoding))

    def ask(self, params: dict[str, Any]) -> dict[str, Any] | None:
        self.questions.append(params)
        title = self.answer(params) if callable(self.answer) else self.answer
        if title == "error":  # a client that cannot show the question answers an error
            from pygls.exceptions import JsonRpcMethodNotFound

            raise JsonRpcMethodNotFound("window/showMessageRequest is not supported")
        return {"title": title} if title is not None else None

    # -- reading results ------------------------------------------------------------------------

    def updates_of(self, kind: str) -> list[dict[str, Any]]:
        return [u["update"] for u in self.updates if u["update"].get("sessionUpdate") == kind]

    def progress(self) -> dict[Any, list[dict[str, Any]]]:
        return {token: [json(self.client, v) for v in values]
                for token, values in self.client.progress_reports.items()}


def json(client: LanguageClient, value: Any) -> Any:
    """lsprotocol objects and pygls' namedtuples, as plain JSON."""
    if hasattr(value, "_asdict"):
        return {k: json(client, v) for k, v in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [json(client, v) for v in value]
    if hasattr(value, "__attrs_attrs__"):
        return client.protocol._converter.unstructure(value)
    return value


def capabilities(name: str | None = VSCODE, *, show_message: bool = True,
                 apply_edit: bool = True, resource_ops: bool = True) -> types.ClientCapabilities:
    """A real editor's capabilities (pytest-lsp ships them), minus what a test takes away."""
    caps = client_capabilities(name) if name else types.ClientCapabilities()
    if not show_message and caps.window is not None:
        caps.window.show_message = None
    if not apply_edit and caps.workspace is not None:
        caps.workspace.apply_edit = False
    if not resource_ops and caps.workspace is not None and caps.workspace.workspace_edit:
        caps.workspace.workspace_edit.resource_operations = []
    return caps


@contextlib.asynccontextmanager
async def lsp_editor(tmp: Path, llm: Any = None, *, caps: types.ClientCapabilities | None = None,
                     init_options: dict[str, Any] | None = None, env: dict[str, str] | None = None,
                     command: list[str] | None = None,
                     folders: tuple[Path, ...] = ()) -> AsyncIterator[LspEditor]:
    """A started `talaria lsp` with the project `tmp/project` as its workspace folder (then
    `folders`, more workspace folders)."""
    root = tmp / "project"
    root.mkdir(parents=True, exist_ok=True)
    if llm is not None and llm.default_turn is None:
        llm.default_turn = {"text": "Done."}
    config = ClientServerConfig(
        server_command=command or SERVER_CMD, client_factory=make_client,
        server_env={**server_env(tmp / "home", llm), **(env or {})})
    client = await config.start()
    ed = LspEditor(client, root)
    structure = client.protocol._converter.structure
    client.feature(types.WORKSPACE_APPLY_EDIT)(lambda params: structure(
        ed.apply(json(client, params)), types.ApplyWorkspaceEditResult))
    client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)(lambda params: (
        None if (item := ed.ask(json(client, params))) is None
        else structure(item, types.MessageActionItem)))
    client.feature("talaria/update")(lambda params: ed.updates.append(json(client, params)))
    caps = caps if caps is not None else capabilities()
    try:
        with anyio.fail_after(TIMEOUT):
            await client.initialize_session(types.InitializeParams(
                capabilities=caps, root_uri=ed.uri(""), process_id=os.getpid(),
                workspace_folders=[types.WorkspaceFolder(uri=ed.uri(""), name="project"), *(
                    types.WorkspaceFolder(uri=f.as_uri(), name=f.name) for f in folders)],
                initialization_options=init_options))
        yield ed
        with anyio.fail_after(TIMEOUT):
            await client.shutdown_session()
    finally:
        await stop(client)


async def stop(client: LanguageClient) -> None:
    """Stop the client; a server still running (a failed test) gets EOF, then a kill."""
    proc = client._server
    if proc is not None and proc.returncode is None:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            with anyio.fail_after(5):
                await proc.wait()
        except TimeoutError:
            proc.kill()
    await client.stop()
