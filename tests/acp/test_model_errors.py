"""A failing model answers `session/prompt` with a model error a client can tell from a bug.

-32050 (-32000 when the key is refused), a one-line message naming the model, its endpoint and
what to do, and the classified cause in `data`; the session survives for the next prompt.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from talaria.acp_server.jsonrpc import MODEL_ERROR
from tests.acp_harness import Editor
from tests.acpschema import check

FAST_429 = {"fault": {"status": 429, "retry_after_ms": 10}}
FAST_529 = {"fault": {"status": 529, "retry_after_ms": 10}}
RETRIES = 3  # RetryingProvider's default


def prompt_error(ed: Editor, sid: str) -> dict:
    response = ed.response(ed.send_prompt(sid, "hello"), timeout=30)
    assert "error" in response, response
    check("Error", response["error"])
    return response["error"]


@pytest.mark.parametrize(
    ("script", "code", "cause", "retries", "advice"),
    [
        ([FAST_429] * (RETRIES + 1), MODEL_ERROR, "rate_limited", RETRIES, "Wait a minute"),
        ([FAST_529] * (RETRIES + 1), MODEL_ERROR, "overloaded", RETRIES, "Try again in a few"),
        ([{"fault": {"status": 402}}], MODEL_ERROR, "billing", 0, "Add credit"),
        ([{"fault": {"status": 404}}], MODEL_ERROR, "model_not_found", 0, "Check the model name"),
        ([{"fault": {"status": 401}}], -32000, "auth", 0, "Check OPENAI_API_KEY"),
    ],
)
def test_model_failures_are_classified_model_errors(
    tmp_path: Path, fake_llm, script, code, cause, retries, advice
) -> None:
    fake_llm.script(script)
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        sid = ed.new_session()
        error = prompt_error(ed, sid)
        fake_llm.script([{"text": "back"}])
        assert ed.prompt(sid, "again")["stopReason"] == "end_turn"  # the session survives
    assert error["code"] == code, error
    data = error["data"]
    assert data["cause"] == cause and data["provider"] == "openai" and data["model"] == "openai:fake"
    assert data["endpoint"] == fake_llm.openai_base_url
    assert data.get("retries", 0) == retries
    message = error["message"]
    assert fake_llm.openai_base_url in message and advice in message, message
    assert "\n" not in message and "Internal error" not in message
    assert message.count(advice) == 1  # the advice once, not once per retry


def test_an_unreachable_endpoint_names_the_url_and_the_setting(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nobody listens on (bound, never accepting)
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        env = {"TALARIA_MODEL": "openai:fake", "OPENAI_API_KEY": "x", "OPENAI_BASE_URL": url}
        with Editor(tmp_path, env=env) as ed:
            ed.initialize()
            sid = ed.new_session()
            error = prompt_error(ed, sid)
    assert error["code"] == MODEL_ERROR
    assert error["data"]["cause"] == "unreachable" and error["data"]["endpoint"] == url
    assert error["data"]["retries"] == RETRIES
    assert url in error["message"] and "OPENAI_BASE_URL" in error["message"]
    assert "timed out" not in error["message"]


def test_a_context_overflow_that_compaction_cannot_fix(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([{"fault": "context_overflow"}] * 4)
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        sid = ed.new_session()
        error = prompt_error(ed, sid)
    assert error["code"] == MODEL_ERROR and error["data"]["cause"] == "context_overflow"
    assert "start a new session" in error["message"]


def test_no_model_configured_says_which_settings_to_set(tmp_path: Path) -> None:
    with Editor(tmp_path, credentials=False) as ed:
        ed.initialize()
        error = ed.error("session/new", {"cwd": str(ed.project), "mcpServers": []})
    assert error.code == -32000
    assert "no model configured" in error.data and "TALARIA_MODEL" in error.data
    assert "authentication failed" not in error.data and "Check the API key" not in error.data
    assert str(ed.home) not in error.data  # no local path of the agent's machine
