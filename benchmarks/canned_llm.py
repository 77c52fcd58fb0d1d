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
                owner.requests.append(json.loads(body or b"{}"))
                time.sleep(owner.delay)
                owner.served += 1
                answer = owner.stream().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.openai_base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def stream(self) -> str:
        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            data = {"id": "chatcmpl-canned", "object": "chat.completion.chunk",
                    "created": int(time.time()), "model": "canned", "choices": [choice]}
            return f"data: {json.dumps(data)}\n\n"

        return (chunk({"role": "assistant", "content": ""}) + chunk({"content": self.text})
                + chunk({}, "stop") + "data: [DONE]\n\n")

    def __enter__(self) -> CannedLLM:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
