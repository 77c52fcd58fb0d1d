"""`DocumentWorkspace`: the Workspace seam for `talaria lsp`, over the editor's open documents.

Reads: an open document's text as the editor last sent it (unsaved buffers win, as ACP's
`fs/read_text_file` does), else what Talaria last wrote through the editor, else the disk.
Writes: every change is a `workspace/applyEdit` (the editor's undo stack and dirty-buffer
handling) with line edits computed from the change (`edits.text_edits`); a file that is not
open is edited through applyEdit too, a new one created with `documentChanges` where the client
supports resource operations. Without applyEdit (or `create`), the disk is written and the
user told. Commands and searches run on the disk (`LocalWorkspace`): a command is told which
files Talaria edited that the editor has not saved yet, since it sees the saved versions.

The editor is behind a small `Editor` protocol, so this module knows nothing of pygls.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from talaria.acp_server.lsp.edits import text_edits
from talaria.tools.local.workspace import LocalWorkspace
from talaria.tools.workspace import CommandResult, SearchPage, WorkspaceError

if TYPE_CHECKING:
    from talaria.tools.sandbox.tiers import SandboxSpec


@dataclass(frozen=True, slots=True)
class OpenDocument:
    uri: str
    text: str
    version: int | None


class Editor(Protocol):
    """What the workspace needs from the LSP client (`server.TalariaServer` implements it)."""

    @property
    def encoding(self) -> str:
        """The negotiated position encoding: utf-8, utf-16 or utf-32."""
        ...

    @property
    def can_apply(self) -> bool:
        """The client takes `workspace/applyEdit`."""
        ...

    @property
    def can_create(self) -> bool:
        """The client takes `documentChanges` with `create` operations."""
        ...

    @property
    def versioned(self) -> bool:
        """The client takes `documentChanges` (versioned text document edits)."""
        ...

    def document(self, path: Path) -> OpenDocument | None:
        """The open document for `path`, if the editor has it open."""
        ...

    def uri(self, path: Path) -> str: ...

    async def apply_edit(self, label: str, edit: dict[str, Any]) -> str | None:
        """Send `workspace/applyEdit`: None when applied, else why not (one line)."""
        ...

    async def notice(self, text: str) -> None:
        """Tell the user something (the session's transcript and a log message)."""
        ...


class DocumentWorkspace:
    def __init__(self, local: LocalWorkspace, editor: Editor) -> None:
        self.local = local
        self.editor = editor
        self.cwd = local.cwd
        self.roots = local.roots
        self.written: dict[Path, tuple[str, int | None]] = {}
        """Path -> (text Talaria applied, the open document's version then, or None)."""
        self.unsaved: set[Path] = set()
        """Files edited through the editor and not saved since (commands see the disk)."""
        self.on_edit: Callable[[Path], Awaitable[None]] | None = None
        """Called after each file written: the door counts edits for its summary."""

    # -- what the editor tells us --------------------------------------------------------

    def saved(self, path: Path) -> None:
        self.unsaved.discard(_key(path))

    def closed(self, path: Path) -> None:
        """A closed buffer's unsaved text is gone (or saved): the disk is the truth again."""
        self.unsaved.discard(_key(path))
        self.written.pop(_key(path), None)

    # -- Workspace -------------------------------------------------------------------------

    async def read_text(self, path: Path) -> str:
        key = _key(path)
        doc = self.editor.document(key)
        written = self.written.get(key)
        if written is not None and (doc is None or doc.version == written[1]):
            return written[0]  # the editor has not sent its own copy of our edit yet
        if doc is not None:
            if "\x00" in doc.text:
                raise WorkspaceError(f"binary file: {path}")
            return doc.text
        return await self.local.read_text(key)

    async def write_text(self, path: Path, text: str) -> None:
        self.local.files_may_change()
        key = _key(path)
        if not self.editor.can_apply:
            await self._write_disk(key, text, "your editor does not take workspace/applyEdit")
        elif (doc := self.editor.document(key)) is not None:
            written = self.written.get(key)
            if written is not None and doc.version == written[1]:
                # Our last edit has not come back as a didChange yet: edit on top of it,
                # unversioned (the editor's version moved on by one we have not seen).
                await self._edit(key, written[0], text, None, keep=doc.version)
            else:
                await self._edit(key, doc.text, text, doc.version)
        elif (written := self.written.get(key)) is not None:  # edited before, never opened
            await self._edit(key, written[0], text, None)
        elif key.exists():
            old = await self.local.read_text(key)
            await self._edit(key, old, text, None)
        elif self.editor.can_create:
            uri = self.editor.uri(key)
            await self._apply(key, f"Talaria: create {key.name}", {"documentChanges": [
                {"kind": "create", "uri": uri, "options": {"ignoreIfExists": True}},
                _document_edit(uri, None, [{"range": _ZERO, "newText": text}]),
            ]}, text, None)
        else:
            await self._write_disk(key, text, "your editor cannot create files through LSP")
        if self.on_edit is not None:
            await self.on_edit(key)

    async def _edit(self, key: Path, old: str, new: str, version: int | None, *,
                    keep: int | None = None) -> None:
        """Apply old -> new; `version` goes in the edit, the written text is remembered
        against `keep` (default: `version`), the open document's version it belongs to."""
        edits = text_edits(old, new, self.editor.encoding)
        if not edits:
            return
        uri = self.editor.uri(key)
        if self.editor.versioned:
            edit: dict[str, Any] = {"documentChanges": [_document_edit(uri, version, edits)]}
        else:
            edit = {"changes": {uri: edits}}
        await self._apply(key, f"Talaria: edit {key.name}", edit, new,
                          version if keep is None else keep)

    async def _apply(self, key: Path, label: str, edit: dict[str, Any], text: str,
                     version: int | None) -> None:
        refused = await self.editor.apply_edit(label, edit)
        if refused is not None:
            raise WorkspaceError(f"the editor did not apply the edit to {key}: {refused}")
        self.written[key] = (text, version)
        self.unsaved.add(key)

    async def _write_disk(self, key: Path, text: str, why: str) -> None:
        await self.local.write_text(key, text)
        self.written.pop(key, None)
        await self.editor.notice(f"{why}: wrote {self._shown(key)} on disk")

    def _shown(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.cwd))
        except ValueError:
            return str(path)

    async def search(self, pattern: str, **kwargs: Any) -> SearchPage:
        return await self.local.search(pattern, **kwargs)

    async def start(self, command: str, **kwargs: Any) -> Any:
        return await self.local.start(command, **kwargs)

    async def run(
        self,
        command: str,
        *,
        cwd: Path,
        timeout: float,
        output_limit: int,
        on_terminal: Callable[[str], Awaitable[None]] | None = None,
        sandbox: SandboxSpec | None = None,
        shell: str | None = None,
    ) -> CommandResult:
        result = await self.local.run(command, cwd=cwd, timeout=timeout, output_limit=output_limit,
                                      on_terminal=on_terminal, sandbox=sandbox, shell=shell)
        if not self.unsaved:
            return result
        names = ", ".join(sorted(self._shown(p) for p in self.unsaved))
        note = (f"[talaria: edited in the editor and not saved yet, so this command saw the "
                f"saved version of: {names}]\n")
        return dataclasses.replace(result, output=note + result.output)


_ZERO = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}


def _document_edit(uri: str, version: int | None, edits: list[dict[str, Any]]) -> dict[str, Any]:
    return {"textDocument": {"uri": uri, "version": version}, "edits": edits}


def _key(path: Path) -> Path:
    return Path(os.path.abspath(path))
