"""Additional directories (ACP `sessionCapabilities.additionalDirectories`, issue 27 point 4):
roots of the project beside `cwd` for the path policy, search, sandboxes, checkpoints; validated
with one -32602 line per bad entry; stored with the session and reported by `session/list`;
each lifecycle request's list is the whole list (ACP: omitted means none)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from talaria.tools.paths import MAX_ADDITIONAL_DIRS
from talaria.tools.sandbox import tiers
from tests.acp.test_acp_permissions import call, tool_results
from tests.acp_harness import Editor

needs_sandbox = pytest.mark.skipif(tiers.detect_tier() == "rlimits", reason="no sandbox tier here")


def dirs(tmp_path: Path, *names: str) -> list[Path]:
    made = []
    for name in names:
        (tmp_path / name).mkdir(exist_ok=True)
        made.append(tmp_path / name)
    return made


def open_with(ed: Editor, extra: list[Path], mode: str = "accept_edits", **caps: Any) -> str:
    ed.initialize(**caps)
    sid = ed.request("session/new", {"cwd": str(ed.project), "mcpServers": [],
                                     "additionalDirectories": [str(d) for d in extra]})["sessionId"]
    ed.request("session/set_mode", {"sessionId": sid, "modeId": mode})
    return sid


def listed(ed: Editor) -> dict[str, Any]:
    return {s["sessionId"]: s.get("additionalDirectories", [])
            for s in ed.request("session/list", {})["sessions"]}


def test_additional_directories_are_inside_the_project(tmp_path: Path, fake_llm) -> None:
    lib, elsewhere = dirs(tmp_path, "lib", "elsewhere")
    (lib / "util.py").write_text("def helper():\n    return 42\n")
    fake_llm.script([
        {"tool_calls": [call("read_file", path=str(lib / "util.py")),
                        call("write_file", path=str(lib / "new.py"), content="x = 1\n"),
                        call("search_files", pattern="helper", path=str(lib)),
                        call("write_file", path=str(elsewhere / "no.py"), content="y = 2\n")]},
        {"text": "done"},
    ])
    with Editor(tmp_path, fake_llm, permission="reject_once") as ed:
        caps = ed.initialize()["agentCapabilities"]
        assert caps["sessionCapabilities"]["additionalDirectories"] == {}
        sid = ed.request("session/new", {"cwd": str(ed.project), "mcpServers": [],
                                         "additionalDirectories": [str(lib)]})["sessionId"]
        ed.request("session/set_mode", {"sessionId": sid, "modeId": "accept_edits"})
        assert ed.prompt(sid, "work in lib")["stopReason"] == "end_turn"
        asked = [p["toolCall"] for p in ed.permission_requests]
        assert listed(ed)[sid] == [str(lib)]
    results = list(tool_results(fake_llm).values())
    assert "return 42" in json.dumps(results[0])
    assert (str(lib / "new.py"), "x = 1\n") in ed.writes  # no question: inside the project
    assert results[2]["matches"][0]["path"] == str(lib / "util.py")
    # Only the directory that was not added asks, as outside the project.
    assert [a["title"] for a in asked] == [f"Write {elsewhere / 'no.py'}"]
    assert "outside the project" in json.dumps(asked[0])
    system = fake_llm.requests[0]["json"]["messages"][0]["content"]
    assert f"Also part of the project (absolute paths reach them): {lib}." in system


def test_bad_additional_directories_are_refused_by_name(tmp_path: Path, fake_llm) -> None:
    (tmp_path / "a-file").write_text("")
    many = [str(d) for d in dirs(tmp_path, *(f"d{i}" for i in range(MAX_ADDITIONAL_DIRS + 1)))]
    cases = {
        "relative/dir": "'relative/dir' is not an absolute path",
        str(tmp_path / "missing"): "does not exist",
        str(tmp_path / "a-file"): "is not a directory",
    }
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        for entry, words in cases.items():
            for method, extra in (("session/new", {}), ("session/resume", {"sessionId": "x"})):
                err = ed.error(method, {"cwd": str(ed.project), "mcpServers": [], **extra,
                                        "additionalDirectories": [entry]})
                assert err.code == -32602, (method, entry, err)
                assert "additionalDirectories" in str(err.data) and words in str(err.data)
        err = ed.error("session/new", {"cwd": str(ed.project), "mcpServers": [],
                                       "additionalDirectories": many})
        assert err.code == -32602 and f"at most {MAX_ADDITIONAL_DIRS}" in str(err.data)
        wrong = ed.response(ed.send_raw({"jsonrpc": "2.0", "id": "wrong", "method": "session/new",
                                         "params": {"cwd": str(ed.project), "mcpServers": [],
                                                    "additionalDirectories": [3]}}))["error"]
        assert wrong["code"] == -32602 and "additionalDirectories[0]" in str(wrong["data"])
        # Repeats and the cwd itself are dropped: the list reported is the roots that count.
        sid = ed.request("session/new", {"cwd": str(ed.project), "mcpServers": [],
                                         "additionalDirectories": [
                                             many[0], many[0] + "/", str(ed.project), many[1]]})[
            "sessionId"]
        assert listed(ed)[sid] == many[:2]
        # null is the default (the schema's x-deserialize-default-on-null), as the SDKs read it.
        # (The JSON schema itself says array: sent raw, past the harness's check.)
        sid = ed.response(ed.send_raw({"jsonrpc": "2.0", "id": "null", "method": "session/new",
                                       "params": {"cwd": str(ed.project), "mcpServers": None,
                                                  "additionalDirectories": None}}))[
            "result"]["sessionId"]
        assert listed(ed)[sid] == []


def test_each_lifecycle_request_sets_the_whole_list(tmp_path: Path, fake_llm) -> None:
    one, two = dirs(tmp_path, "one", "two")
    fake_llm.script([
        {"tool_calls": [call("write_file", path=str(two / "in-two.txt"), content="2")]},
        {"text": "wrote"},
    ])
    with Editor(tmp_path, fake_llm, permission="reject_once", unstable=True) as ed:  # fork
        sid = open_with(ed, [one])
        assert listed(ed)[sid] == [str(one)]
        # Open in this process with other roots: opened again with those.
        ed.request("session/resume", {"sessionId": sid, "cwd": str(ed.project), "mcpServers": [],
                                      "additionalDirectories": [str(two)]})
        assert listed(ed)[sid] == [str(two)]
        ed.request("session/set_mode", {"sessionId": sid, "modeId": "accept_edits"})
        assert ed.prompt(sid, "write in two")["stopReason"] == "end_turn"
        assert not ed.permission_requests  # `two` is inside the project now
        told = [m["content"] for m in fake_llm.requests[0]["json"]["messages"]]
        assert told[-2:] == [f"[The project's additional directories are now (absolute paths "
                             f"reach them): {two}.]", [{"type": "text", "text": "write in two"}]]
        fork = ed.request("session/fork", {"sessionId": sid, "cwd": str(ed.project),
                                           "mcpServers": [], "additionalDirectories": [str(one)]})
        assert listed(ed)[fork["sessionId"]] == [str(one)]
    with Editor(tmp_path, fake_llm, home=tmp_path / "home") as ed:  # a new process
        ed.initialize()
        assert listed(ed)[sid] == [str(two)]
        ed.request("session/load", {"sessionId": sid, "cwd": str(ed.project), "mcpServers": []})
        assert listed(ed)[sid] == []  # omitted: no additional roots from now on


@needs_sandbox
def test_sandboxed_commands_and_scripts_may_write_additional_directories(tmp_path: Path,
                                                                         fake_llm) -> None:
    lib, elsewhere = dirs(tmp_path, "lib", "elsewhere")
    script = f"open({str(lib / 'from-script.txt')!r}, 'w').write('s')\nprint('wrote')"
    fake_llm.script([
        {"tool_calls": [call("terminal", command=f"echo t > {lib}/from-command.txt"),
                        call("terminal", command=f"echo t > {elsewhere}/from-command.txt")]},
        {"tool_calls": [call("execute_code", code=script)]},
        {"text": "done"},
    ])
    with Editor(tmp_path, fake_llm, permission="reject_once") as ed:
        sid = open_with(ed, [lib], mode="auto")  # commands run unasked, in the sandbox
        assert ed.prompt(sid, "write")["stopReason"] == "end_turn"
        assert not ed.permission_requests
    assert (lib / "from-command.txt").exists(), tool_results(fake_llm)
    assert (lib / "from-command.txt").read_text() == "t\n"
    assert (lib / "from-script.txt").read_text() == "s"
    assert not (elsewhere / "from-command.txt").exists()  # read-only in the sandbox


def test_checkpoints_cover_additional_directories(tmp_path: Path, fake_llm) -> None:
    lib, = dirs(tmp_path, "lib")
    (lib / "kept.txt").write_text("v1\n")
    fake_llm.script([
        {"tool_calls": [call("write_file", path=str(lib / "kept.txt"), content="v2\n"),
                        call("write_file", path=str(lib / "made.txt"), content="new\n"),
                        call("write_file", path="in-project.txt", content="p\n")]},
        {"text": "changed"},
    ])
    with Editor(tmp_path, fake_llm) as ed:
        sid = open_with(ed, [lib], fs=False)  # writes go to the disk
        assert ed.prompt(sid, "change lib")["stopReason"] == "end_turn"
        assert (lib / "kept.txt").read_text() == "v2\n"
        assert ed.prompt(sid, "/checkpoints")["stopReason"] == "end_turn"
        assert ed.prompt(sid, "/undo")["stopReason"] == "end_turn"
        said = "".join(u["content"]["text"] for u in ed.updates(sid, "agent_message_chunk"))
    assert (lib / "kept.txt").read_text() == "v1\n"
    assert not (lib / "made.txt").exists() and not (ed.project / "in-project.txt").exists()
    assert f"{lib}/kept.txt" in said and "Restored 3 file(s)" in said, said
