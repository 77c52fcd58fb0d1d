"""A fake LLM on loopback that speaks the real OpenAI and Anthropic streaming wire formats.

    with FakeLLM() as llm:
        llm.script([{"text": "hi"}, {"fault": {"status": 429, "retry_after": 1}}, ...])
        OpenAIProvider("m", api_key="k", base_url=llm.openai_base_url)       # .../v1
        AnthropicProvider("m", api_key="k", base_url=llm.anthropic_base_url)
        llm.requests  # [{"path", "json", "headers"}, ...] every request received

POST /v1/chat/completions and POST /v1/messages both take the next TURN from one queue
(the TURN format of `agent/providers/replay.py`). Special turns inject faults:

    {"fault": {"status": 429, "retry_after": 1}}     any status; each API's real error body;
                                                     optional "retry_after_ms", "message",
                                                     "code", "type" override it; "body" replaces it
    {"fault": "context_overflow"}                    400 with the real context-length error
    {"fault": "stall", "after_chunks": N}            N events, then silence until the client
                                                     hangs up (or `stall_seconds`)
    {"fault": "disconnect", "after_chunks": N}       N events, then the connection drops
    {"fault": "malformed", "after_chunks": N}        N events, then a garbage data line
    {"fault": "stream_error", "after_chunks": N,     N events, then an in-stream error event
     "error_type": "overloaded_error"}               (Anthropic `error`, OpenAI error chunk)

A fault turn may carry "text" etc. for the events sent before the fault. When the script
is empty, `responder(body)` answers if set, else `default_turn`, or (None) a 500 "fake LLM
script exhausted". `llm.respond = fn(body) -> TURN | None` answers before the script (None: take
the script), for requests that interleave (parallel subagents each get their own story).
`FakeLLM(latency=0.2)` waits before each answer; a turn's `"delay": seconds` overrides it.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from talaria.agent.providers.replay import split_text, turn_finish, turn_tool_calls, turn_usage

_OPENAI_ERRORS = {
    400: ("invalid_request_error", None, "Invalid request."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided: sk-fake."),
    402: ("insufficient_quota", 402, "Insufficient credits. Add more credits to continue."),
    403: ("invalid_request_error", "unsupported_country_region_territory", "Not supported."),
    404: ("invalid_request_error", "model_not_found", "The model `x` does not exist."),
    413: ("invalid_request_error", None, "Request entity too large."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for requests."),
    500: ("server_error", None, "The server had an error while processing your request."),
    529: ("overloaded_error", None, "Overloaded"),
}
_ANTHROPIC_ERRORS = {
    400: ("invalid_request_error", "Invalid request."),
    401: ("authentication_error", "invalid x-api-key"),
    402: ("billing_error", "Your credit balance is too low to access the Anthropic API."),
    403: ("permission_error", "Your API key does not have permission to use this resource."),
    404: ("not_found_error", "model: x"),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of request tokens has exceeded your rate limit."),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}
_CONTEXT_OVERFLOW = {
    "openai": {
        "error": {
            "message": "This model's maximum context length is 128000 tokens. However, your "
            "messages resulted in 130017 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    },
    "anthropic": {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 208310 tokens > 200000 maximum",
        },
    },
}
_OPENAI_FINISH = {"refusal": "content_filter"}
_ANTHROPIC_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


class FakeLLM:
    """The server; use as a context manager (or `start()` / `close()`)."""

    def __init__(self, *, instant: bool = True, chunk_delay: float = 0.01, stall_seconds=5.0,
                 latency: float = 0.0):
        self.instant = instant  # True: no delay between events
        self.chunk_delay = chunk_delay
        self.latency = latency
        """Seconds before each answer (a turn's "delay" overrides it)."""
        self.respond: Any = None
        """fn(request body) -> TURN or None (then the script answers)."""
        self.stall_seconds = stall_seconds
        self.default_turn: dict[str, Any] | None = None
        self.responder: Any = None
        """With the script empty: a function of the request body (the API's JSON) returning
        the next TURN, for scripted models that react to what they are sent."""
        self.requests: list[dict[str, Any]] = []
        self.served = 0  # turns taken from the script (or the default)
        self._queue: deque[dict[str, Any]] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.fake = self  # type: ignore[attr-defined]
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def openai_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def remaining(self) -> int:
        return len(self._queue)

    def script(self, turns: list[dict[str, Any]]) -> FakeLLM:
        """Replace the pending turns."""
        with self._lock:
            self._queue = deque(turns)
        return self

    def start(self) -> FakeLLM:
        serve = self._server.serve_forever
        self._thread = threading.Thread(target=serve, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _take(self, path: str, body: dict[str, Any], headers: dict[str, str]):
        with self._lock:
            self.requests.append({"path": path, "json": body, "headers": headers})
            turn = self.respond(body) if self.respond is not None else None
            if turn is None and self._queue:
                turn = self._queue.popleft()
            elif turn is None and self.responder is not None:  # a policy that reads the request
                turn = self.responder(body)
            elif turn is None:
                turn = self.default_turn
            if turn is not None:
                self.served += 1
            return turn, self.served


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        fake: FakeLLM = self.server.fake  # type: ignore[attr-defined]
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.loads(raw or b"{}")
        headers = {k.lower(): v for k, v in self.headers.items()}
        if self.path.endswith("/chat/completions"):
            api = "openai"
        elif self.path.endswith("/messages"):
            api = "anthropic"
        else:
            return self._json(404, {"error": {"message": f"no route {self.path}"}})
        turn, number = fake._take(self.path, body, headers)
        delay = (turn or {}).get("delay", fake.latency)
        if delay:
            time.sleep(delay)
        if turn is None:
            return self._error(api, {"status": 500, "message": "fake LLM script exhausted"})
        fault = turn.get("fault")
        if isinstance(fault, dict):
            return self._error(api, fault)
        if fault == "context_overflow":
            return self._json(400, _CONTEXT_OVERFLOW[api])
        render = _openai_events if api == "openai" else _anthropic_events
        events = render(turn, number, body)
        self._stream(fake, api, events, turn)

    def _stream(self, fake: FakeLLM, api: str, events: list[str], turn: dict[str, Any]) -> None:
        fault = turn.get("fault")
        if fault:
            events = events[: int(turn.get("after_chunks", 1))]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self._close_after()
        self.end_headers()
        try:
            for event in events:
                self._chunk(event)
                if not fake.instant:
                    time.sleep(fake.chunk_delay)
            if fault == "stall":
                self._wait_for_hangup(fake)
                return
            if fault == "disconnect":
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if fault == "malformed":
                self._chunk(
                    "event: content_block_delta\n" * (api == "anthropic") + "data: {oops\n\n"
                )
            if fault == "stream_error":
                self._chunk(_stream_error(api, turn.get("error_type", "overloaded_error")))
            self._chunk("")
        except OSError:
            pass  # the client went away

    def _close_after(self) -> None:
        # No keep-alive: a pooled connection outlives the event loop of a test that used
        # it, and the SDK client's finalizer then fails inside some later test's loop.
        self.send_header("Connection", "close")
        self.close_connection = True

    def _chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _wait_for_hangup(self, fake: FakeLLM) -> None:
        deadline = time.monotonic() + fake.stall_seconds
        while time.monotonic() < deadline and not fake._stopping.is_set():
            readable, _, _ = select.select([self.connection], [], [], 0.05)
            if readable and not self.connection.recv(1, socket.MSG_PEEK):
                return

    def _error(self, api: str, fault: dict[str, Any]) -> None:
        status = int(fault.get("status", 500))
        headers = {}
        if fault.get("retry_after") is not None:
            headers["retry-after"] = str(fault["retry_after"])
        if fault.get("retry_after_ms") is not None:
            headers["retry-after-ms"] = str(fault["retry_after_ms"])
        if api == "openai":
            type_, code, message = _OPENAI_ERRORS.get(status, ("api_error", None, "Error."))
            error = {"message": message, "type": type_, "param": None, "code": code}
            error.update({k: fault[k] for k in ("message", "type", "code") if k in fault})
            body: dict[str, Any] = {"error": error}
        else:
            type_, message = _ANTHROPIC_ERRORS.get(status, ("api_error", "Error."))
            error = {"type": fault.get("type", type_), "message": fault.get("message", message)}
            body = {"type": "error", "error": error, "request_id": "req_fake"}
        self._json(status, fault.get("body", body), headers)

    def _json(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self._close_after()
        self.end_headers()
        self.wfile.write(data)


def _sse(data: dict[str, Any], event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n"


def _pieces(text: str, n: int = 3) -> list[str]:
    size = max(1, -(-len(text) // n))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _stream_error(api: str, error_type: str) -> str:
    error = {"type": error_type, "message": error_type.replace("_error", "").capitalize()}
    if api == "openai":
        return _sse({"error": {**error, "code": None, "param": None}})
    return _sse({"type": "error", "error": error}, "error")


def _openai_events(turn: dict[str, Any], number: int, body: dict[str, Any]) -> list[str]:
    base = {
        "id": f"chatcmpl-fake{number}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model", "fake"),
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return _sse({**base, "choices": [choice]})

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"reasoning_content": p}) for p in split_text(turn.get("reasoning") or "")]
    events += [chunk({"content": p}) for p in split_text(turn.get("text") or "")]
    for i, call in enumerate(turn_tool_calls(turn, number)):
        function = {"name": call["name"], "arguments": ""}
        first = {"index": i, "id": call["id"], "type": "function", "function": function}
        events.append(chunk({"tool_calls": [first]}))
        for piece in _pieces(call["arguments"]):
            events.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
    finish = turn_finish(turn)
    events.append(chunk({}, _OPENAI_FINISH.get(finish, finish)))
    if (body.get("stream_options") or {}).get("include_usage"):
        usage = turn_usage(turn, len(json.dumps(body)))
        wire_usage = {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.input_tokens + usage.output_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens},
            "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        }
        events.append(_sse({**base, "choices": [], "usage": wire_usage}))
    return [*events, "data: [DONE]\n\n"]


def _anthropic_events(turn: dict[str, Any], number: int, body: dict[str, Any]) -> list[str]:
    usage = turn_usage(turn, len(json.dumps(body)))
    cache = {
        "cache_read_input_tokens": usage.cache_read_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
    }
    uncached = max(0, usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens)
    message = {
        "id": f"msg_fake{number}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "fake"),
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": uncached, "output_tokens": 1, **cache},
    }
    events = [_sse({"type": "message_start", "message": message}, "message_start")]
    events.append(_sse({"type": "ping"}, "ping"))
    blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    if turn.get("reasoning"):
        deltas = [{"type": "thinking_delta", "thinking": p} for p in split_text(turn["reasoning"])]
        signature = turn.get("signature") or f"sig_{number}"
        deltas.append({"type": "signature_delta", "signature": signature})
        blocks.append(({"type": "thinking", "thinking": "", "signature": ""}, deltas))
    if turn.get("redacted_thinking"):
        blocks.append(({"type": "redacted_thinking", "data": turn["redacted_thinking"]}, []))
    if turn.get("text"):
        deltas = [{"type": "text_delta", "text": p} for p in split_text(turn["text"])]
        blocks.append(({"type": "text", "text": ""}, deltas))
    for call in turn_tool_calls(turn, number):
        pieces = ["", *_pieces(call["arguments"])]  # the real API opens with an empty delta
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
        blocks.append(
            ({"type": "tool_use", "id": call["id"], "name": call["name"], "input": {}}, deltas)
        )
    for index, (start, deltas) in enumerate(blocks):
        events.append(
            _sse(
                {"type": "content_block_start", "index": index, "content_block": start},
                "content_block_start",
            )
        )
        for delta in deltas:
            events.append(
                _sse(
                    {"type": "content_block_delta", "index": index, "delta": delta},
                    "content_block_delta",
                )
            )
        events.append(_sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    finish = turn_finish(turn)
    out_usage: dict[str, Any] = {"output_tokens": usage.output_tokens, **cache}
    if usage.reasoning_tokens:
        out_usage["output_tokens_details"] = {"thinking_tokens": usage.reasoning_tokens}
    delta = {"stop_reason": _ANTHROPIC_STOP.get(finish, finish), "stop_sequence": None}
    events.append(
        _sse({"type": "message_delta", "delta": delta, "usage": out_usage}, "message_delta")
    )
    events.append(_sse({"type": "message_stop"}, "message_stop"))
    return events


def collect(provider: Any, messages: list[dict[str, Any]], tools: Any = (), **kwargs: Any):
    """Run `provider.stream(...)` to the end on a fresh event loop; return its events."""
    import anyio

    async def run() -> list[Any]:
        return [event async for event in provider.stream(messages, list(tools), **kwargs)]

    return anyio.run(run)
