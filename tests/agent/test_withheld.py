"""Tool results of secret paths are marked when stored: kept in the live session and the
session's own transcript, withheld from recall, the search index and exports, whatever route
read them (read_file, a command, a script, a script's tool call, a subagent), and in a
database written before the mark existed."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest

from talaria.acp_server.history import replay_updates
from talaria.agent.loop import run_turn
from talaria.agent.recall import session_search
from talaria.agent.session import Session
from talaria.agent.store import SCHEMA_VERSION, Store
from talaria.agent.trajectories.export import FORMATS, ToolCatalog, export
from talaria.agent.trajectories.load import load_trajectory, write_transcript
from talaria.agent.withheld import MAX_MENTIONS, TOO_LONG, secret_reached
from talaria.tools.paths import Sensitive
from talaria.tools.redact import WITHHELD
from tests.agent.test_recall_policy import CANARY, KEY, Asker, call
from tests.agent.test_subagents import delegate, router
from tests.helpers import make_session

ENV_TEXT = "ENV-CANARY-31337\n"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "userhome"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(KEY)
    monkeypatch.setenv("HOME", str(home))
    return home


def turn(fake_llm: Any, tmp_path: Path, *calls: dict[str, Any], mode: str = "bypass",
         store: Store | None = None, answer: str = "done") -> tuple[Session, Store]:
    store = store or Store(tmp_path / "sessions.db")
    session = make_session(fake_llm, tmp_path, store=store, mode=mode, asker=Asker())
    (session.cwd / ".env").write_text(ENV_TEXT)
    fake_llm.script([{"tool_calls": list(calls)}, {"text": answer}])
    assert anyio.run(run_turn, session, "go") == "end_turn"
    return session, store


def marks(store: Store, session_id: str) -> list[str | None]:
    rows = sqlite3.connect(store.path).execute(
        "SELECT message, withheld FROM messages WHERE session_id = ? ORDER BY seq", (session_id,))
    return [w for text, w in rows if json.loads(text)["role"] == "tool"]


ROUTES = [
    pytest.param([call("read_file", path="~/.ssh/id_rsa")], "id_rsa", id="read_file"),
    pytest.param([call("terminal", command="cat $HOME/.ssh/id_rsa | head -5")], "id_rsa", id="terminal"),
    pytest.param([call("terminal", command="cd ~/.ssh && cat id_rsa")], ".ssh", id="terminal-cd"),
    pytest.param([call("execute_code", code="print(open('.env').read())")], ".env", id="script"),
    pytest.param([call("execute_code", code="from hermes_tools import read_file\n"
                                            "print(read_file(path='.env'))")], ".env",
                 id="script-tool-call"),
]


@pytest.mark.parametrize(("calls", "named"), ROUTES)
def test_every_route_to_a_secret_is_marked_and_kept_out_of_recall(
        fake_llm: Any, tmp_path: Path, home: Path, calls: list[dict[str, Any]], named: str) -> None:
    session, store = turn(fake_llm, tmp_path, *calls)
    live = json.dumps([m for m in session.messages if m.get("role") == "tool"])
    assert CANARY in live or "ENV-CANARY" in live, live  # the live session is as it was
    [mark] = marks(store, session.id)
    assert mark is not None and named in mark
    index = sqlite3.connect(store.path).execute("SELECT text FROM messages_fts").fetchall()
    assert not any("CANARY" in text for (text,) in index)
    page = session_search(store, {"session_id": session.id, "around_message_id": 3, "window": 5},
                          cwd=session.cwd, session_id="another")
    shown = json.dumps(page)
    assert "CANARY" not in shown and "[content of a sensitive read withheld: " in shown


def test_a_subagents_secret_marks_the_delegate_result(fake_llm: Any, tmp_path: Path,
                                                      home: Path) -> None:
    fake_llm.respond = router({"peek": lambda done: {"tool_calls": [call("read_file", path=".env")]}
                               if done == 0 else {"text": "The variable is set."}})
    session, store = turn(fake_llm, tmp_path, delegate("peek")["tool_calls"][0])
    [mark] = marks(store, session.id)
    assert mark is not None and mark.endswith(".env")
    [result] = [m for m in session.messages if m.get("name") == "delegate_task"]
    assert "ENV-CANARY" not in json.dumps(result["subagents"][0]["messages"][-1])
    [run] = result["subagents"]
    assert any(m.get(WITHHELD) for m in run["messages"])  # and the child's own result is marked
    for fmt in FORMATS:
        assert "ENV-CANARY" not in export([load_trajectory(store, session.id)], fmt, ToolCatalog())


def test_ordinary_calls_and_refused_reads_are_not_marked(fake_llm: Any, tmp_path: Path,
                                                         home: Path) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "notes.txt").write_text("ssh setup notes\n")
    session, store = turn(fake_llm, tmp_path, call("read_file", path="notes.txt"),
                          call("terminal", command="echo ssh is fine; ls -la"),
                          call("read_file", path="~/.ssh/id_rsa"), mode="dont_ask")
    assert marks(store, session.id) == [None, None, None]  # the last one was refused unread
    found = session_search(store, {"query": "notes", "role_filter": "tool"}, cwd=session.cwd,
                           session_id="another")
    assert "ssh setup notes" in json.dumps(found)


def test_exports_withhold_and_the_sessions_own_transcript_and_replay_keep(
        fake_llm: Any, tmp_path: Path, home: Path) -> None:
    session, store = turn(fake_llm, tmp_path, call("read_file", path="~/.ssh/id_rsa"),
                          answer=f"The key's comment is {CANARY}.")
    for fmt in FORMATS:
        out = export([load_trajectory(store, session.id)], fmt, ToolCatalog())
        assert CANARY not in out and "sensitive read withheld" in out, fmt
    assert CANARY in write_transcript(store, session.id, tmp_path / "out").read_text()
    replayed = json.dumps(list(replay_updates(store.messages(session.id), {t.name: t for t in session.tools})))
    assert CANARY in replayed  # session/load shows what the user saw


def test_secret_reached_names_paths_in_any_text_and_has_a_bound(tmp_path: Path) -> None:
    sensitive, cwd = Sensitive(tmp_path / "h"), tmp_path / "p"
    for text in ("cat ~/.aws/credentials", "x=$(cat .env.local)", 'open("deploy.pem")',
                 "scp ${HOME}/.ssh/id_ed25519 host:", "git -C . show HEAD:.git/config"):
        assert secret_reached(sensitive, cwd, (), text), text
    for text in ("cat .env.example", "echo $SSH_AUTH_SOCK", "os.environ['HOME']", "ls -la src"):
        assert secret_reached(sensitive, cwd, (), text) is None, text
    words = " ".join(f"w{i}" for i in range(MAX_MENTIONS + 1))
    assert secret_reached(sensitive, cwd, (), words) == TOO_LONG
    assert secret_reached(sensitive, cwd, (), words.rsplit(" ", 1)[0]) is None


def _old_database(path: Path, home: Path, cwd: str) -> None:
    """A store as Talaria left it before the mark: no `withheld` column, version 1."""
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE sessions (id TEXT PRIMARY KEY, cwd TEXT NOT NULL, title TEXT, model TEXT,
            mode TEXT, created_at REAL NOT NULL, updated_at REAL NOT NULL, meta TEXT NOT NULL DEFAULT '{}');
        CREATE TABLE messages (session_id TEXT NOT NULL REFERENCES sessions(id), seq INTEGER NOT NULL,
            created_at REAL NOT NULL, message TEXT NOT NULL, PRIMARY KEY (session_id, seq));
        CREATE VIRTUAL TABLE messages_fts USING fts5(text, role UNINDEXED, session_id UNINDEXED,
            seq UNINDEXED, prefix = '2 3');
    """)
    db.execute("INSERT INTO sessions VALUES ('old', ?, 't', 'm', 'default', 1, 1, '{}')", (cwd,))
    rows = [
        {"role": "user", "content": "show my key"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "name": "terminal", "arguments": json.dumps({"command": "cat ~/.ssh/id_rsa"})},
            {"id": "c2", "name": "read_file", "arguments": json.dumps({"path": "README.md"})}]},
        {"role": "tool", "tool_call_id": "c1", "name": "terminal", "status": "completed",
         "content": json.dumps({"output": KEY}), "locations": [cwd]},
        {"role": "tool", "tool_call_id": "c2", "name": "read_file", "status": "completed",
         "content": json.dumps({"content": "readme text"}), "locations": [cwd + "/README.md"]},
    ]
    for seq, message in enumerate(rows, 1):
        text = json.dumps(message)
        cursor = db.execute("INSERT INTO messages VALUES ('old', ?, 1, ?)", (seq, text))
        db.execute("INSERT INTO messages_fts (rowid, text, role, session_id, seq) VALUES (?, ?, ?, 'old', ?)",
                   (cursor.lastrowid, text, message["role"], seq))
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()


def test_an_old_database_gets_the_column_and_its_secret_results_are_withheld(
        tmp_path: Path, home: Path) -> None:
    path = tmp_path / "old.db"
    _old_database(path, home, str(tmp_path / "project"))
    store = Store(path)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    assert marks(store, "old") == [str(home / ".ssh" / "id_rsa"), None]
    indexed = sqlite3.connect(path).execute("SELECT text FROM messages_fts").fetchall()
    assert not any(CANARY in text for (text,) in indexed) and len(indexed) == 3
    page = json.dumps(session_search(store, {"session_id": "old", "around_message_id": 3},
                                     cwd=tmp_path / "project", session_id="now"))
    assert CANARY not in page and "readme text" in page
    assert store.messages("old")[2][WITHHELD] == str(home / ".ssh" / "id_rsa")
    store.copy_session("old", "fork")  # a fork keeps the mark
    assert marks(store, "fork") == [str(home / ".ssh" / "id_rsa"), None]
    Store(path)  # opened again: judged once


def test_a_background_commands_output_read_later_is_withheld(fake_llm: Any, tmp_path: Path,
                                                             home: Path) -> None:
    def respond(body: dict[str, Any]) -> dict[str, Any] | None:
        last = body["messages"][-1]
        if last["role"] == "tool" and '"pid"' in last["content"]:
            started = json.loads(last["content"])["session_id"]
            return {"tool_calls": [call("process", action="wait", session_id=started, timeout=10)]}
        return None

    fake_llm.respond = respond
    session, store = turn(fake_llm, tmp_path, call("terminal", command="cat .env", background=True))
    waited = next(m for m in session.messages if m.get("name") == "process")
    assert "ENV-CANARY" in waited["content"]  # the live session saw the output
    assert [m is not None and m.endswith(".env") for m in marks(store, session.id)] == [True, True]


def test_the_store_itself_is_a_secret(tmp_path: Path) -> None:
    sensitive = Sensitive(tmp_path / "h", talaria_home=tmp_path / "t")
    for name in ("sessions.db", "sessions.db-wal", "sessions.db-shm"):
        assert sensitive.secret(tmp_path / "t" / name), name
    assert not sensitive.secret(tmp_path / "t" / "config.toml")
    assert not sensitive.secret(tmp_path / "project" / "sessions.db")  # a project's own file
    assert secret_reached(sensitive, tmp_path / "project", (), "sqlite3 ../t/sessions.db .dump")
