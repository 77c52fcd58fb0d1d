"""A fake LLM that answers each request by looking at it, for many tasks running at once.

`FakeLLM`'s script is one queue, so concurrent tasks would take each other's turns. Here
`route(body)` picks the turn from the request itself (the task's prompt, the last message),
and the server counts how many requests it is serving at once (`peak`).

    script_turn(body)   a small scripted agent: "write PATH TEXT" writes, reads back, reports;
                        "fail" gets a 400; "crash" kills its own worker; anything else: "done".
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from tests.fakellm import FakeLLM

Route = Callable[[dict[str, Any]], dict[str, Any]]
MEET_S = 30.0
"""How long a request waits for the others `RoutedLLM.meet` asks for (then it goes on)."""


def prompt_of(body: dict[str, Any]) -> str:
    return next((str(m.get("content")) for m in body.get("messages", [])
                 if m.get("role") == "user"), "")


def tool_results(body: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in body.get("messages", []) if m.get("role") == "tool"]


def script_turn(body: dict[str, Any]) -> dict[str, Any]:
    prompt, results = prompt_of(body), tool_results(body)
    words = prompt.split()
    if words[:1] == ["write"]:
        path, text = words[1], " ".join(words[2:])
        if not results:
            return {"tool_calls": [{"name": "write_file",
                                    "arguments": {"path": path, "content": text}}]}
        if len(results) == 1:
            return {"tool_calls": [{"name": "read_file", "arguments": {"path": path}}]}
        return {"text": f"read back: {json.loads(results[-1]).get('content', results[-1])}"}
    if prompt == "fail":
        return {"fault": {"status": 400, "message": "scripted failure"}}
    if prompt == "crash" and not results:
        return {"tool_calls": [{"name": "terminal", "arguments": {"command": "kill -9 $PPID"}}]}
    return {"text": "done"}


class RoutedLLM(FakeLLM):
    def __init__(self, route: Route = script_turn, *, delay: float = 0.0) -> None:
        super().__init__()
        self.route = route
        self.delay = delay
        """Seconds each request waits before it is answered (a slow model)."""
        self.prompts: list[str] = []
        self.active = 0
        self.peak = 0
        self.meet = 0
        """Requests wait (up to MEET_S) until this many have been served at once: a test of
        concurrency that must not hang on a slow start of the second worker."""
        self._count_lock = threading.Lock()
        self._met = threading.Condition(self._count_lock)

    def _take(self, path: str, body: dict[str, Any], headers: dict[str, str]):
        with self._count_lock:
            self.prompts.append(prompt_of(body))
            self.served += 1
            number = self.served
            self.active += 1
            self.peak = max(self.peak, self.active)
            self._met.notify_all()
            self._met.wait_for(lambda: self.peak >= self.meet, MEET_S)
        try:
            if self.delay:
                time.sleep(self.delay)
            return self.route(body), number
        finally:
            with self._count_lock:
                self.active -= 1
