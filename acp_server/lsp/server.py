"""`talaria lsp` on pygls: the language server, its features and commands.

Owns no agent logic: document sync goes to pygls' document store (what `DocumentWorkspace`
reads), code actions and commands to `prompts` and `sessions.LspAgent`. Messages Talaria sends
(`talaria/update`, `$/progress`, applyEdit, showMessageRequest...) are plain JSON, as in the
ACP door; pygls types only what it receives (`protocol.TalariaProtocol` checks it first).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from talaria.acp_server.lsp import commands, prompts
from talaria.acp_server.lsp.capabilities import CODE_ACTION_KINDS
from talaria.acp_server.lsp.documents import DocumentWorkspace, OpenDocument
from talaria.acp_server.lsp.door import ClientError
from talaria.acp_server.lsp.protocol import TalariaProtocol, work_done
from talaria.acp_server.lsp.sessions import LspAgent, LspFailure
from talaria.acp_server.version import version
from talaria.agent.config import Config

log = logging.getLogger(__name__)


class TalariaServer(LanguageServer):
    protocol: TalariaProtocol

    def __init__(self, config: Config) -> None:
        super().__init__("talaria", version(), protocol_cls=TalariaProtocol,
                         text_document_sync_kind=types.TextDocumentSyncKind.Full)
        self.config = config
        self.agent: LspAgent | None = None
        self.documents: DocumentWorkspace | None = None
        self.init_options: dict[str, Any] = {}

    # -- door.Client / sessions.Editor / documents.Editor -----------------------------------

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.protocol.notify(method, params)

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        try:
            return plain(await self.protocol.send_request_async(method, params))
        except JsonRpcException as exc:
            raise ClientError(f"{exc.code} {exc.message}") from None

    def start_agent(self) -> LspAgent:
        return _start_agent(self)

    def _capability(self, *names: str) -> Any:
        value: Any = self.client_capabilities
        for name in names:
            value = getattr(value, name, None)
        return value

    def progress_supported(self) -> bool:
        return bool(self._capability("window", "work_done_progress"))

    def show_document_supported(self) -> bool:
        return bool(self._capability("window", "show_document", "support"))

    @property
    def encoding(self) -> str:
        return str(self.workspace.position_encoding or "utf-16")

    @property
    def can_apply(self) -> bool:
        return bool(self._capability("workspace", "apply_edit"))

    @property
    def versioned(self) -> bool:
        edit = self._capability("workspace", "workspace_edit")
        return bool(getattr(edit, "document_changes", None) or getattr(edit, "resource_operations", None))

    @property
    def can_create(self) -> bool:
        ops = self._capability("workspace", "workspace_edit", "resource_operations") or ()
        return types.ResourceOperationKind.Create in ops

    def uri(self, path: Path) -> str:
        return str(from_fs_path(str(path)))

    def document(self, path: Path) -> OpenDocument | None:
        for uri, doc in self.workspace.text_documents.items():
            if (fs := to_fs_path(uri)) is not None and Path(fs) == path:
                return OpenDocument(doc.uri, doc.source, doc.version)
        return None

    async def apply_edit(self, label: str, edit: dict[str, Any]) -> str | None:
        try:
            result = await self.request("workspace/applyEdit", {"label": label, "edit": edit})
        except ClientError as exc:
            return f"workspace/applyEdit failed: {exc}"
        if isinstance(result, dict) and result.get("applied") is True:
            return None
        reason = result.get("failureReason") if isinstance(result, dict) else None
        return reason or "the editor refused it"

    async def notice(self, text: str) -> None:
        self.notify("window/showMessage", {"type": 2, "message": f"Talaria: {text}"})
        if self.agent is not None and self.agent.session is not None:
            await self.agent.session.door.emit(_notice(text))


def plain(value: Any) -> Any:
    """A result pygls gave back as nested namedtuples (untyped methods), as plain JSON again."""
    if hasattr(value, "_asdict"):
        return {key: plain(item) for key, item in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value


def _notice(text: str) -> Any:
    from talaria.agent.events import Notice

    return Notice(text)


def build_server(config: Config) -> TalariaServer:
    """The server with every feature and command registered (nothing runs yet)."""
    server = TalariaServer(config)

    @server.feature(types.INITIALIZE)
    def initialize(ls: TalariaServer, params: types.InitializeParams) -> None:
        options = params.initialization_options
        ls.init_options = options if isinstance(options, dict) else {}

    @server.feature(types.INITIALIZED)
    def initialized(ls: TalariaServer, params: types.InitializedParams) -> None:
        _start_agent(ls)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: TalariaServer, params: types.DidSaveTextDocumentParams) -> None:
        if ls.documents is not None and (path := to_fs_path(params.text_document.uri)):
            ls.documents.saved(Path(path))

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: TalariaServer, params: types.DidCloseTextDocumentParams) -> None:
        if ls.documents is not None and (path := to_fs_path(params.text_document.uri)):
            ls.documents.closed(Path(path))

    @server.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    def progress_cancel(ls: TalariaServer, params: types.WorkDoneProgressCancelParams) -> None:
        if ls.agent is not None:
            ls.agent.cancel_progress(params.token)

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: TalariaServer, params: Any) -> None:
        if ls.agent is not None:
            ls.agent.close()

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind(k) for k in CODE_ACTION_KINDS]))
    def code_action(ls: TalariaServer, params: types.CodeActionParams) -> list[dict[str, Any]]:
        unstructure = ls.protocol._converter.unstructure
        return prompts.code_actions(params.text_document.uri, unstructure(params.range),
                                    [unstructure(d) for d in params.context.diagnostics])

    commands.register(server, work_done)
    return server


def _start_agent(ls: TalariaServer) -> LspAgent:
    """The agent for this client, made once `initialize` told us who the client is."""
    from talaria.agent.permissions import MODES, normalize_mode
    from talaria.tools.local.workspace import LocalWorkspace

    if ls.agent is not None:
        return ls.agent
    mode = ls.config.mode if ls.config.mode in MODES else "default"
    unattended: str | None = ls.config.lsp_unattended_mode
    wanted = ls.init_options.get("mode")
    if isinstance(wanted, str) and wanted:
        unattended = None  # the user's choice holds, also for a client that cannot ask
        try:
            mode = normalize_mode(wanted)
        except ValueError as exc:
            ls.notify("window/showMessage", {"type": 2, "message": f"Talaria: {exc}; using {mode}"})
        if mode not in MODES:  # bypass is for headless runs
            mode = "default"
    model = ls.init_options.get("model")
    roots = _roots(ls)
    ls.documents = DocumentWorkspace(LocalWorkspace(roots[0], roots), ls)
    ls.agent = LspAgent(ls, ls.config, ls.documents, unattended=unattended, mode=mode,
                        model=model if isinstance(model, str) and model.strip() else None)
    return ls.agent


def _roots(ls: TalariaServer) -> tuple[Path, ...]:
    """The project: the first workspace folder (else `rootUri`, else the cwd), then the other
    folders as its additional directories."""
    from talaria.tools.paths import MAX_ADDITIONAL_DIRS, additional_dirs

    def directories(uris: list[str | None]) -> list[Path]:
        return [Path(p) for uri in uris if uri and (p := to_fs_path(uri)) and Path(p).is_dir()]

    folders = directories([f.uri for f in ls.workspace.folders.values()])
    found = folders or directories([ls.workspace.root_uri])
    root = found[0] if found else Path.cwd()
    extra = [str(p) for p in folders[1:] if p.is_absolute()]

    try:
        return (root, *additional_dirs(root, extra[:MAX_ADDITIONAL_DIRS]))
    except ValueError as exc:  # an unreadable folder: the project without the others
        ls.notify("window/showMessage", {"type": 2, "message": f"Talaria: {exc}"})
        return (root,)


def failure(exc: LspFailure) -> JsonRpcException:
    return JsonRpcException(exc.message, code=exc.code)
