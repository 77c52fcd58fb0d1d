"""A canned OpenAI-compatible endpoint on loopback for benchmarks that need the real SDK over
HTTP (its import, its client, its parsing): every chat completion streams the same short text
after `delay` seconds. Scripted, multi-step runs use the replay provider (`replay:PATH`)
instead; the tests' fake LLM (tests/fakellm.py) is not the benchmarks' to import."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class CannedLLM:
    def __init__(self, text: str = "done", delay: float = 0.0) -> None:
        self.text, self.delay, self.served = text, delay, 0
        self.requests: list[dict[str, Any]] = []
        """Each request's JSON body, in order."""
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request = json.loads(body or b"{}")
                owner.requests.append(request)
                time.sleep(owner.delay)
                owner.served += 1
                wants_usage = bool((request.get("stream_options") or {}).get("include_usage"))
                answer = owner.stream(len(body) if wants_usage else None).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.openai_base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def stream(self, request_bytes: int | None = None) -> str:
        """The SSE answer; with `request_bytes`, a last chunk with `usage`, as the OpenAI API
        sends when asked (`stream_options.include_usage`; the agent always asks). Its
        prompt_tokens is a stand-in, a quarter of the request's bytes: nothing is tokenized."""
        def event(data: dict[str, Any]) -> str:
            base = {"id": "chatcmpl-canned", "object": "chat.completion.chunk",
                    "created": int(time.time()), "model": "canned"}
            return f"data: {json.dumps({**base, **data})}\n\n"

        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            return event({"choices": [{"index": 0, "delta": delta, "logprobs": None,
                                       "finish_reason": finish}]})

        text = (chunk({"role": "assistant", "content": ""}) + chunk({"content": self.text})
                + chunk({}, "stop"))
        if request_bytes is not None:
            prompt, completion = request_bytes // 4, max(1, len(self.text) // 4)
            text += event({"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                                    "total_tokens": prompt + completion}})
        return text + "data: [DONE]\n\n"

    def __enter__(self) -> CannedLLM:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
