"""The web tools in an editor: `fetch` cards whose content lists the URLs, every message
checked against the official ACP schema by the harness."""

from __future__ import annotations

from pathlib import Path

from benchmarks.webserver import PageServer
from tests.acp_checks import check_turn, final
from tests.acp_harness import Editor


def test_web_calls_are_fetch_cards_with_their_urls(tmp_path: Path, fake_llm, web: PageServer) -> None:
    env = {"TALARIA_WEB_SEARCH": "searxng", "TALARIA_WEB_ENDPOINT": web.url("/searxng"),
           "TALARIA_WEB_ALLOW_NETWORKS": "127.0.0.0/8"}
    urls = [web.url("/article"), web.url("/missing")]
    fake_llm.script([
        {"tool_calls": [{"id": "s", "name": "web_search", "arguments": {"query": "rust"}},
                        {"id": "e", "name": "web_extract", "arguments": {"urls": urls}}]},
        {"text": "Read them."},
    ])
    with Editor(tmp_path, fake_llm, env=env) as ed:
        ed.initialize()
        sid = ed.new_session()
        prompt_id = ed.send_prompt(sid, "research rust runtimes")
        assert ed.result(prompt_id)["stopReason"] == "end_turn"
        cards = check_turn(ed, sid, prompt_id)
        search, extract = cards["s"], cards["e"]
        assert (search[0]["kind"], search[0]["title"]) == ("fetch", "Search the web: rust")
        assert search[0]["rawInput"] == {"query": "rust"}
        assert extract[0]["kind"] == "fetch"
        listed = [u for u in extract if u.get("content") and u.get("status") != "completed"]
        assert listed[0]["content"] == [{"type": "content", "content": {"type": "text",
                                                                        "text": "\n".join(urls)}}]
        done = final(extract)["content"][0]["content"]["text"]
        assert done.startswith(f"✓ {urls[0]} — Rust async runtimes compared")
        assert f"✗ {urls[1]}: HTTP 404 Not Found" in done
        assert final(search)["status"] == final(extract)["status"] == "completed"
        asked = {p["toolCall"]["toolCallId"] for p in ed.permission_requests}
        assert asked == {"s", "e"}
