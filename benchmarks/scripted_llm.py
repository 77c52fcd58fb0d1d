"""An OpenAI-compatible endpoint on loopback whose every answer is chosen by a function of the
request (`route(body) -> TURN`, the replay provider's TURN: {"text"} or {"tool_calls": [{"name",
"arguments"}]}), streamed as the OpenAI API streams it, with usage at about four characters a
token (agent.providers.replay.turn_usage). For benchmarks of multi-step runs where tasks run in
parallel and the model must react to what it is sent (a skill offered or not): a replay file
plays one fixed conversation. The tests' fake LLM (tests/fakellm.py) is not the benchmarks'.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from talaria.agent.providers.replay import split_text, turn_finish, turn_tool_calls, turn_usage

Route = Callable[[dict[str, Any]], dict[str, Any]]
FINISH = {"stop": "stop", "tool_calls": "tool_calls", "length": "length"}


class ScriptedLLM:
    def __init__(self, route: Route) -> None:
        self.route = route
        self.requests: list[dict[str, Any]] = []
        """Each request's JSON body, in order."""
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw or b"{}")
                with owner._lock:
                    owner.requests.append(body)
                    number = len(owner.requests)
                answer = owner.stream(owner.route(body), number, body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.openai_base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @staticmethod
    def stream(turn: dict[str, Any], number: int, body: dict[str, Any]) -> str:
        base = {"id": f"chatcmpl-scripted{number}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": body.get("model", "scripted")}

        def event(data: dict[str, Any]) -> str:
            return f"data: {json.dumps({**base, **data})}\n\n"

        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            return event({"choices": [{"index": 0, "delta": delta, "logprobs": None,
                                       "finish_reason": finish}]})

        events = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"content": piece}) for piece in split_text(turn.get("text") or "")]
        for i, call in enumerate(turn_tool_calls(turn, number)):
            events.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                                 "function": {"name": call["name"],
                                                              "arguments": call["arguments"]}}]}))
        events.append(chunk({}, FINISH.get(turn_finish(turn), "stop")))
        usage = turn_usage(turn, len(json.dumps(body)))
        events.append(event({"choices": [], "usage": {
            "prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens,
            "total_tokens": usage.input_tokens + usage.output_tokens}}))
        return "".join(events) + "data: [DONE]\n\n"

    def __enter__(self) -> ScriptedLLM:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
