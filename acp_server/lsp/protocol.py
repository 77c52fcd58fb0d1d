"""`TalariaProtocol`: pygls' LSP protocol, with every message checked before pygls acts on it.

pygls types messages while parsing them and drops one it cannot type without an answer, keeps
no lifecycle (a request before `initialize` fails on its missing workspace with a traceback;
one after `shutdown` is dropped unanswered) and puts tracebacks in its errors. So messages
come here as plain JSON (`frames.FrameReader` hands over only JSON objects) and:

- a request that is not one (bad id, `jsonrpc`, `method`, params not an object) gets -32600
  or -32602 with its id (id null when it has none a reply can carry);
- a request before `initialize` gets -32002 ServerNotInitialized, one after `shutdown` -32600,
  a second `initialize` -32600; notifications then are dropped, except `exit` (LSP's rules);
- params pygls cannot type get -32602 naming the field (`$.arguments`);
- a notification is never answered, however wrong; a response goes to pygls;
- an error reply carries no traceback: internal errors say where the details are logged.
"""

from __future__ import annotations

import contextvars
import logging
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from talaria.acp_server.lsp.capabilities import COMMANDS
from talaria.acp_server.lsp.frames import INVALID_REQUEST, valid_id

log = logging.getLogger(__name__)

METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_NOT_INITIALIZED = -32002
MAX_METHOD_CHARS = 100
"""Longest method name quoted in an error (no method is longer; a hostile one may be)."""
MAX_REASON_CHARS = 300
MAX_ERROR_CHARS = 600
"""Longest error message sent (pygls quotes a method name whole)."""
"""Longest quoted reason (a cattrs error list, an exception's text) in an error message."""
SENT_AS_JSON = frozenset({
    "workspace/applyEdit", "window/showMessageRequest", "window/showDocument",
    "window/workDoneProgress/create", "$/progress", "window/logMessage", "window/showMessage",
})
"""Methods Talaria sends with plain-JSON params and reads plain-JSON results of."""
NOTIFICATIONS = frozenset(m for m, kinds in types.METHOD_TO_TYPES.items() if kinds[1] is None)
"""LSP's notification methods (either direction): as a request, none is answered by pygls."""
work_done = contextvars.ContextVar[Any]("work_done_token", default=None)
"""The running command's work-done token (its task copies the context)."""


class TalariaProtocol(LanguageServerProtocol):
    _server: Any
    """`server.TalariaServer` (not imported: the server imports this module)."""
    answered: Any = None
    """The id of the `initialize` that `main.py` answered before pygls was loaded: pygls
    handles that request again (to set itself up) and its reply is dropped."""
    answered_error = False
    """`main.py` answered that `initialize` with an error: pygls does not see it."""
    initialized = False
    """An `initialize` request was taken (LSP's lifecycle starts there)."""
    exit_status = 0
    """`talaria lsp`'s status: 1 after an `exit` without `shutdown` (LSP's rule; pygls' own
    sys.exit(1) is swallowed by its start_io)."""

    def structure_message(self, data: dict[str, Any]) -> Any:
        return data  # typed in handle_message, once, at the top level (see the docstring)

    def handle_message(self, message: Any) -> None:
        if not isinstance(message, dict):
            return
        if "method" not in message:
            if "id" in message and ("result" in message or "error" in message):
                self._dispatch(message)  # a response to one of our requests
            else:
                msg_id = message.get("id")
                self._error(msg_id if valid_id(msg_id) else None, INVALID_REQUEST,
                            "not a request, notification or response: a message needs a "
                            "`method` (a response, `result` or `error`)")
            return
        method = message["method"]
        if isinstance(method, str) and len(method) > MAX_METHOD_CHARS:
            method = method[:MAX_METHOD_CHARS] + "..."  # named in errors: not a megabyte of it
        if "id" not in message:
            if self._notification_ok(message, method):
                self._dispatch(message)
            return
        msg_id = message["id"]
        if not valid_id(msg_id):
            self._error(None, INVALID_REQUEST, "a request's `id` must be an integer or a string")
        elif (problem := self._request_problem(message, method)) is not None:
            code, text = problem
            self._error(msg_id, code, text)
        elif self._answered_badly(msg_id):
            return  # main.py answered this initialize with an error: pygls never sets up
        elif (typed := self._typed(message, msg_id)) is not None:
            if method == types.INITIALIZE:
                self.initialized = True
            super().handle_message(typed)

    def _notification_ok(self, message: dict[str, Any], method: Any) -> bool:
        """Whether a notification is handled: a wrong one is dropped, never answered."""
        if method == types.EXIT and message.get("jsonrpc") == "2.0":
            self.exit_status = 0 if self._shutdown else 1
            return True
        if message.get("jsonrpc") != "2.0" or not isinstance(method, str):
            log.warning("dropped a notification that is not one: %.200r", message)
            return False
        if not self.initialized or self._shutdown:
            log.info("dropped %s: not initialized, or shut down", method)
            return False
        return True

    def _request_problem(self, message: dict[str, Any], method: Any) -> tuple[int, str] | None:
        if message.get("jsonrpc") != "2.0":
            return INVALID_REQUEST, 'a request needs "jsonrpc": "2.0"'
        if not isinstance(method, str) or not method:
            return INVALID_REQUEST, "a request's `method` must be a non-empty string"
        params = message.get("params")
        if params is not None and not isinstance(params, dict):
            return INVALID_PARAMS, f"{method} takes `params` as an object, not {_kind(params)}"
        if self._shutdown:
            return INVALID_REQUEST, f"{method}: the server is shutting down (shutdown was " \
                                    "received): only `exit` is taken now"
        if method == types.INITIALIZE:
            if self.initialized:
                return INVALID_REQUEST, "initialize was already received: send it once"
        elif not self.initialized:
            return SERVER_NOT_INITIALIZED, f"{method}: the server is not initialized: " \
                                           "send `initialize` first"
        if method == types.WORKSPACE_EXECUTE_COMMAND:
            return _command_problem(params)
        if method in NOTIFICATIONS:  # pygls would type it as the notification: no answer ever
            return METHOD_NOT_FOUND, f"{method} is a notification: send it without an `id`"
        return None

    def _answered_badly(self, msg_id: Any) -> bool:
        if self.answered_error and msg_id == self.answered:
            self.answered, self.answered_error = None, False
            return True
        return False

    def _typed(self, message: dict[str, Any], msg_id: Any) -> Any:
        """The request as pygls' types; None after answering -32602."""
        try:
            return LanguageServerProtocol.structure_message(self, message)
        except Exception as exc:  # cattrs raises several kinds; each is bad params here
            why = reason(exc)
        if message["method"] == types.INITIALIZE and msg_id == self.answered:
            # Already answered with the capabilities (main.py reads only `capabilities`):
            # set up from what can be typed, not from nothing.
            log.warning("initialize params pygls cannot type (%s): using capabilities only", why)
            caps: Any
            for caps in (message["params"].get("capabilities"), {}):
                try:
                    return LanguageServerProtocol.structure_message(self, {
                        **message, "params": {"processId": None, "rootUri": None,
                                              "capabilities": caps}})
                except Exception:
                    continue
        self._error(msg_id, INVALID_PARAMS, f"invalid params for {message['method']}: {why}")
        return None

    def _dispatch(self, message: dict[str, Any]) -> None:
        if message.get("jsonrpc") != "2.0":
            log.warning("dropped a message without \"jsonrpc\": \"2.0\": %.200r", message)
            return
        try:
            typed = LanguageServerProtocol.structure_message(self, message)
        except Exception as exc:
            log.warning("dropped a %s pygls cannot type: %s", message.get("method", "response"),
                        reason(exc))
            return
        super().handle_message(typed)

    def _error(self, msg_id: Any, code: int, text: str) -> None:
        self._send_response(msg_id, error=types.ResponseError(code=code, message=text))

    def _send_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        if msg_id is not None and msg_id == self.answered:
            self.answered, self.answered_error = None, False
            return
        if error is not None:
            error = _plain_error(error)
        super()._send_response(msg_id, result, error)

    def get_message_type(self, method: str) -> Any:  # type: ignore[override]
        return None if method in SENT_AS_JSON else super().get_message_type(method)

    def get_result_type(self, method: str) -> Any:  # type: ignore[override]
        return None if method in SENT_AS_JSON else super().get_result_type(method)

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        # A running request is stopped through its session, like talaria.cancel, and answers
        # with what it has (stopReason "cancelled", the partial result LSP allows): pygls'
        # own cancel would kill its task in the middle of saving the turn.
        agent = self._server.agent
        if agent is None or not agent.cancel_request(msg_id):
            super()._handle_cancel_notification(msg_id)

    @lsp_method(types.WORKSPACE_EXECUTE_COMMAND)
    def lsp_workspace__execute_command(self, params: types.ExecuteCommandParams) -> Any:
        if params.command not in self.fm.commands:
            raise JsonRpcInvalidParams(f"unknown command {params.command!r}; Talaria's commands "
                                       f"are {', '.join(COMMANDS)}")
        work_done.set(params.work_done_token)  # the command's task copies this context
        return (yield from super().lsp_workspace__execute_command(params))


def _command_problem(params: dict[str, Any] | None) -> tuple[int, str] | None:
    """What is wrong with executeCommand's params as JSON (cattrs reads an object or a string
    as a list of its keys or characters)."""
    if params is None or not isinstance(params.get("command"), str):
        return INVALID_PARAMS, "workspace/executeCommand needs params {command: \"talaria.ask\", " \
                               "arguments: [...]}: `command` must be a string"
    arguments = params.get("arguments")
    if arguments is not None and not isinstance(arguments, list):
        return INVALID_PARAMS, f"workspace/executeCommand: `arguments` must be a list " \
                               f"(e.g. [\"your question\"]), not {_kind(arguments)}"
    return None


def _plain_error(error: types.ResponseError) -> types.ResponseError:
    """`error` in one line of at most MAX_ERROR_CHARS, without pygls' traceback in `data`;
    an internal error points at the log."""
    message = str(error.message).splitlines()[0][:MAX_ERROR_CHARS] if error.message else ""
    if error.code == INTERNAL_ERROR:
        message = f"talaria lsp failed: {message} (the traceback is in $TALARIA_HOME/logs/)"
        log.error("internal error answered: %s; data: %.2000s", error.message, error.data)
    data = error.data if not (isinstance(error.data, dict) and "traceback" in error.data) else None
    return types.ResponseError(code=error.code, message=message, data=data)


def reason(exc: Exception) -> str:
    """Why `exc` (a cattrs error, any exception), in at most MAX_REASON_CHARS."""
    try:
        from cattrs import BaseValidationError, transform_error

        if isinstance(exc, BaseValidationError):
            return "; ".join(transform_error(exc))[:MAX_REASON_CHARS]
    except ImportError:  # an older cattrs: its message is enough
        pass
    return f"{type(exc).__name__}: {exc}"[:MAX_REASON_CHARS]


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")
