"""The permission policy: modes and their names, secrets, what runs unasked and how confined.

Unit level, on real directories: `Permissions.decide` with a scripted asker. The commands
themselves run in tests/agent/test_permissions_sandbox.py and tests/acp/test_acp_permissions.py.
"""

from __future__ import annotations

import random
import string
from pathlib import Path

import anyio
import pytest

from talaria.agent.permissions import (
    ALIASES,
    ALL_MODES,
    MODES,
    NO_SANDBOX,
    Decision,
    PermissionAsk,
    Permissions,
    normalize_mode,
)
from talaria.tools.paths import Sensitive
from talaria.tools.registry import KINDS

ALLOW, ASK, REFUSE = "allow", "ask", "refuse"


class Asker:
    def __init__(self, answer: str = "allow_once") -> None:
        self.answer = answer
        self.asked: list[PermissionAsk] = []

    async def __call__(self, ask: PermissionAsk) -> str:
        self.asked.append(ask)
        return self.answer


def perms(tmp_path: Path, mode: str, answer: str = "allow_once", **kw: object) -> tuple[Permissions, Asker]:
    asker = Asker(answer)
    home = kw.pop("home", tmp_path / "home")
    kw.setdefault("sandbox_tier", "bubblewrap")  # the spec is only built here, never run
    p = Permissions(roots=kw.pop("roots", (tmp_path / "p",)), mode=mode, asker=asker, home=home,
                    sensitive=Sensitive(home, home / ".talaria", kw.pop("extra", ())), **kw)
    return p, asker


def decide(p: Permissions, kind: str, *paths: Path, command: str | None = None) -> Decision:
    return anyio.run(lambda: p.decide(tool_call_id="t", tool="x", kind=kind, title="x",
                                      paths=paths, command=command))


def outcome(p: Permissions, asker: Asker, kind: str, *paths: Path, command: str | None = None) -> str:
    asked = len(asker.asked)
    decision = decide(p, kind, *paths, command=command)
    if len(asker.asked) > asked:
        return ASK
    return REFUSE if decision.refusal else ALLOW


# -- mode names -----------------------------------------------------------------------------

def test_mode_names_and_claude_code_aliases() -> None:
    assert [normalize_mode(m) for m in ALL_MODES] == list(ALL_MODES)
    assert {a: normalize_mode(a) for a in ALIASES} == {
        "acceptEdits": "accept_edits", "dontAsk": "dont_ask", "bypassPermissions": "bypass"}
    assert normalize_mode("  auto ") == "auto"
    assert set(MODES) == set(ALL_MODES) - {"bypass"}


def near_misses() -> list[object]:
    """Typos and look-alikes of every valid name, plus seeded random strings and non-strings."""
    out: list[object] = [None, 5, 1.0, [], {}, True, "", " ", "yolo", "dontask", "dont-ask",
                         "DEFAULT", "Default", "accept-edits", "acceptedits", "bypass_permissions",
                         "plan\x00", "auto\n x", "ａｕｔｏ"]
    for name in (*ALL_MODES, *ALIASES):
        out += [name.upper(), name.title(), name[:-1], name + "s", "_" + name, name.replace("_", "-"),
                name.replace("_", ""), f"{name} {name}", name.swapcase()]
    rng = random.Random(9)
    alphabet = string.ascii_letters + string.digits + "_- .\t\u00e9\u200b"
    out += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 20))) for _ in range(2000)]
    valid = {*ALL_MODES, *ALIASES}
    return [v for v in out if not (isinstance(v, str) and v.strip() in valid)]


def test_every_unknown_mode_name_is_a_clear_error() -> None:
    for value in near_misses():
        with pytest.raises(ValueError) as info:
            normalize_mode(value)
        message = str(info.value)
        assert "unknown permission mode" in message and all(m in message for m in ALL_MODES), value


@pytest.mark.parametrize("kind", KINDS)
def test_an_unknown_mode_never_allows(tmp_path: Path, kind: str) -> None:
    """Whatever the mode field holds (set behind the validators' back), nothing goes through
    unasked: the policy denies by default."""
    (tmp_path / "p").mkdir()
    for mode in near_misses()[:300]:
        p, asker = perms(tmp_path, mode, "reject_once")  # type: ignore[arg-type]
        assert outcome(p, asker, kind, tmp_path / "p" / "a.py", command="true") == ASK, mode
        assert "unknown permission mode" in asker.asked[-1].reason


# -- the policy table -----------------------------------------------------------------------

# What a call inside the project does in each mode, with no earlier answer.
TABLE = {
    #              read   search  think  edit    delete  move    execute fetch   other
    "default":     (ALLOW, ALLOW, ALLOW, ASK,    ASK,    ASK,    ASK,    ASK,    ASK),
    "accept_edits": (ALLOW, ALLOW, ALLOW, ALLOW, ALLOW,  ALLOW,  ASK,    ASK,    ASK),
    "plan":        (ALLOW, ALLOW, ALLOW, REFUSE, REFUSE, REFUSE, REFUSE, REFUSE, REFUSE),
    "auto":        (ALLOW, ALLOW, ALLOW, ALLOW,  ALLOW,  ALLOW,  ALLOW,  ASK,    ASK),
    "dont_ask":    (ALLOW, ALLOW, ALLOW, REFUSE, REFUSE, REFUSE, REFUSE, REFUSE, REFUSE),
    "bypass":      (ALLOW, ALLOW, ALLOW, ALLOW,  ALLOW,  ALLOW,  ALLOW,  ALLOW,  ALLOW),
}
ORDER = ("read", "search", "think", "edit", "delete", "move", "execute", "fetch", "other")


@pytest.mark.parametrize("mode", ALL_MODES)
def test_the_table_inside_the_project(tmp_path: Path, mode: str) -> None:
    assert set(ORDER) == set(KINDS)
    (tmp_path / "p").mkdir()
    got = []
    for kind in ORDER:
        p, asker = perms(tmp_path, mode)
        paths = () if kind in ("think", "execute") else (tmp_path / "p" / "a.py",)
        got.append(outcome(p, asker, kind, *paths, command="make" if kind == "execute" else None))
    assert tuple(got) == TABLE[mode]


@pytest.mark.parametrize("mode", ALL_MODES)
def test_outside_the_project_asks_in_every_mode_but_bypass(tmp_path: Path, mode: str) -> None:
    expected = {"bypass": ALLOW, "dont_ask": REFUSE}.get(mode, ASK)
    for kind in ("read", "search"):
        p, asker = perms(tmp_path, mode)
        assert outcome(p, asker, kind, Path("/etc/hostname")) == expected
    if mode != "plan":
        p, asker = perms(tmp_path, mode)
        assert outcome(p, asker, "edit", tmp_path / "elsewhere.txt") == expected


# -- secrets --------------------------------------------------------------------------------

def secrets_in(home: Path, project: Path) -> list[Path]:
    talaria = home / ".talaria"
    return [
        home / ".ssh" / "id_rsa", home / ".ssh" / "config", project / "deploy" / "id_ed25519",
        project / "certs" / "server.pem", project / "tls.key", project / "keys" / "app.p12",
        project / ".env", project / ".env.local", project / "api" / ".env.production", project / ".envrc",
        project / ".git" / "config", project / ".netrc", home / ".netrc", home / ".pgpass",
        project / ".git-credentials", home / ".git-credentials", talaria / "credentials",
        home / ".aws" / "credentials", home / ".config" / "gcloud" / "application_default_credentials.json",
        home / ".azure" / "accessTokens.json", home / ".kube" / "config", home / ".docker" / "config.json",
        home / ".config" / "gh" / "hosts.yml", home / ".gnupg" / "private-keys-v1.d" / "k.key",
        project / ".npmrc", project / ".pypirc", project / "infra" / "prod.tfstate",
        home / ".vault-token", project / "conf" / "secrets" / "db.json",
    ]


def not_secrets_in(home: Path, project: Path) -> list[Path]:
    return [
        project / "src" / "app.py", project / ".env.example", project / ".env.sample",
        project / "environment.py", project / "id_ed25519.pub", project / ".git" / "HEAD",
        project / ".gitignore", project / ".github" / "workflows" / "ci.yml",
        project / "docs" / ".npmrc", home / ".talaria" / "config.toml", home / ".docker" / "daemon.json",
        home / ".config" / "nvim" / "init.lua", home / "notes.txt", project / "secrets.md",
    ]


@pytest.fixture
def at_home(tmp_path: Path) -> tuple[Path, Path]:
    """The project is $HOME, the issue's example; tokens in the right package configs."""
    home = tmp_path / "home"
    project = home
    for path in secrets_in(home, project) + not_secrets_in(home, project):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x\n")
    (project / ".npmrc").write_text("//registry.npmjs.org/:_authToken=npm_abc\n")
    (project / ".pypirc").write_text("[pypi]\npassword = pypi-abc\n")
    (project / "docs" / ".npmrc").write_text("registry=https://registry.example/\n")
    return home, project


EXTRA = ("*.tfstate", "~/.vault-token", "conf/secrets/*")


@pytest.mark.parametrize("mode", ALL_MODES)
def test_reading_a_secret_asks_in_every_mode_but_bypass(at_home: tuple[Path, Path], mode: str) -> None:
    home, project = at_home
    expected = {"bypass": ALLOW, "dont_ask": REFUSE}.get(mode, ASK)
    for path in secrets_in(home, project):
        for kind in ("read", "search"):
            p, asker = perms(home, mode, roots=(project,), home=home, extra=EXTRA)
            assert outcome(p, asker, kind, path) == expected, (kind, path)
            if expected == ASK:
                assert asker.asked[-1].reason.startswith("sensitive path"), path
    for path in not_secrets_in(home, project):
        p, asker = perms(home, mode, roots=(project,), home=home, extra=EXTRA)
        assert outcome(p, asker, "read", path) == ALLOW, path


def test_a_symlink_to_a_secret_is_a_secret(at_home: tuple[Path, Path]) -> None:
    home, project = at_home
    (project / "innocent.txt").symlink_to(home / ".ssh" / "id_rsa")
    p, asker = perms(home, "auto", roots=(project,), home=home)
    assert outcome(p, asker, "read", project / "innocent.txt") == ASK


def test_writing_repository_internals_asks_but_reading_them_does_not(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    p, asker = perms(tmp_path, "auto")
    hook = tmp_path / "p" / ".git" / "hooks" / "pre-commit"
    assert outcome(p, asker, "read", hook) == ALLOW
    assert outcome(p, asker, "edit", hook) == ASK


def test_a_search_skips_secrets_unless_it_targets_one(at_home: tuple[Path, Path]) -> None:
    home, project = at_home
    p, asker = perms(home, "default", roots=(project,), home=home)
    broad = decide(p, "search", project)
    assert not asker.asked and broad.conceal is not None
    assert broad.conceal(project / ".env") and broad.conceal(home / ".ssh" / "id_rsa")
    assert not broad.conceal(project / "src" / "app.py")
    targeted = decide(p, "search", home / ".ssh")
    assert len(asker.asked) == 1 and targeted.refusal is None and targeted.conceal is None
    p, asker = perms(home, "bypass", roots=(project,), home=home)
    assert decide(p, "search", project).conceal is None


# -- what runs unasked, and confined --------------------------------------------------------

def test_a_command_the_user_did_not_see_runs_confined(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    p, asker = perms(tmp_path, "auto", network=True)
    unseen = decide(p, "execute", command="make")
    assert not asker.asked and unseen.sandbox is not None
    assert unseen.sandbox.writable == (tmp_path / "p",) and unseen.sandbox.network
    assert unseen.sandbox.tier == "bubblewrap"

    p, asker = perms(tmp_path, "default", "allow_always")
    seen = decide(p, "execute", command="make")
    assert len(asker.asked) == 1 and seen.refusal is None and seen.sandbox is None
    remembered = decide(p, "execute", command="make")
    assert len(asker.asked) == 1 and remembered.sandbox is not None, "allow_always: unseen since"
    p.mode = "dont_ask"  # pre-approved: runs, confined; anything else is refused unasked
    assert decide(p, "execute", command="make").sandbox is not None
    refused = decide(p, "execute", command="make install")
    assert "dont_ask" in (refused.refusal or "") and len(asker.asked) == 1

    p, asker = perms(tmp_path, "bypass")
    assert decide(p, "execute", command="make") == Decision()


@pytest.mark.parametrize("mode", ["auto", "default", "dont_ask"])
def test_without_a_sandbox_tier_unseen_commands_ask(tmp_path: Path, mode: str) -> None:
    (tmp_path / "p").mkdir()
    p, asker = perms(tmp_path, mode, "allow_always", sandbox_tier="rlimits")
    p.remembered[("execute", "make")] = True  # as if approved before
    decision = decide(p, "execute", command="make")
    if mode == "dont_ask":
        assert NO_SANDBOX in (decision.refusal or "") and not asker.asked
    else:
        assert asker.asked[-1].reason == NO_SANDBOX
        assert decision.refusal is None and decision.sandbox is None, "seen: runs as asked"


def test_rejected_paths_are_read_only_in_the_sandbox_until_allowed(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    env = tmp_path / "p" / ".env"
    p, asker = perms(tmp_path, "default", "reject_once")
    assert decide(p, "edit", env).refusal == "The user rejected this tool call."
    p.mode = "auto"
    spec = decide(p, "execute", command="f=.en; echo X > ${f}v").sandbox
    assert spec is not None and spec.readonly == (env,)
    mentioned = decide(p, "execute", command="echo X > .env")
    assert mentioned.refusal and "whose edit was rejected" in asker.asked[-1].reason
    asker.answer = "allow_once"
    assert decide(p, "edit", env).refusal is None  # asked again ("rejected before"), allowed
    assert decide(p, "execute", command="true").sandbox.readonly == ()


def test_hidden_paths_of_the_sandbox(at_home: tuple[Path, Path]) -> None:
    home, project = at_home
    p, _ = perms(home, "auto", roots=(project,), home=home, extra=(*EXTRA, "/nonexistent/*"))
    hidden = set(decide(p, "execute", command="ls").sandbox.readable_hidden)
    assert {home / ".ssh", home / ".aws", home / ".kube", home / ".talaria", home / ".vault-token",
            home / ".docker" / "config.json", home / ".config" / "gh"} <= hidden
    assert project / ".env" not in hidden, "project files stay readable to the programs that need them"


# -- configuration --------------------------------------------------------------------------

def test_mode_and_sandbox_settings_from_each_source(tmp_path: Path, fake_llm) -> None:
    from talaria.agent.config import load_config
    from tests.helpers import make_session

    home = tmp_path / "th"
    home.mkdir()
    (home / "config.toml").write_text('mode = "dontAsk"\nsensitive_paths = ["*.tfstate"]\n'
                                      "sandbox_network = true\n")
    config = load_config(env={"TALARIA_HOME": str(home)})
    assert (config.mode, config.sources["mode"]) == ("dont_ask", "config.toml")
    assert config.sensitive_paths == ("*.tfstate",) and config.sandbox_network is True
    env = {"TALARIA_HOME": str(home), "TALARIA_MODE": "bypassPermissions",
           "TALARIA_SENSITIVE_PATHS": "*.tfstate, ~/.vault-token", "TALARIA_SANDBOX_NETWORK": "no"}
    config = load_config(env=env)
    assert (config.mode, config.sandbox_network) == ("bypass", False)
    assert config.sensitive_paths == ("*.tfstate", "~/.vault-token")
    assert load_config({"mode": "acceptEdits"}, env=env).mode == "accept_edits"

    session = make_session(fake_llm, tmp_path, mode="auto", sensitive_paths=("*.tfstate",),
                           sandbox_network="true")
    assert session.permissions.sensitive.extra == ("*.tfstate",) and session.permissions.network
    assert session.permissions.sensitive.secret(session.cwd / "infra" / "prod.tfstate")


@pytest.mark.parametrize(("text", "field"), [
    ('mode = "yolo"', "mode"), ("mode = 3", "mode"), ('mode = "dontask"', "mode"),
    ('sensitive_paths = "*.key"', None), ("sensitive_paths = [1]", "sensitive_paths"),
    ('sandbox_network = "maybe"', "sandbox_network"), ("sandbox_network = 1", "sandbox_network"),
])
def test_bad_values_name_their_source(tmp_path: Path, text: str, field: str | None) -> None:
    from talaria.agent.config import load_config

    (tmp_path / "config.toml").write_text(text + "\n")
    if field is None:  # a comma-separated string is fine (as in the environment)
        assert load_config(env={"TALARIA_HOME": str(tmp_path)}).sensitive_paths == ("*.key",)
        return
    with pytest.raises(ValueError) as info:
        load_config(env={"TALARIA_HOME": str(tmp_path)})
    assert f"bad value for {field} (config.toml)" in str(info.value)


def test_a_rejected_file_with_another_hard_link_makes_unseen_commands_ask(tmp_path: Path) -> None:
    """`ln .env backup` before the rejection: `echo X > backup` would change `.env`'s inode
    whatever is mounted on the name `.env`."""
    (tmp_path / "p").mkdir()
    env = tmp_path / "p" / ".env"
    env.write_text("A=1\n")
    p, asker = perms(tmp_path, "default", "reject_once")
    decide(p, "edit", env)
    p.mode = "auto"
    assert decide(p, "execute", command="true").sandbox is not None
    (tmp_path / "p" / "backup").hardlink_to(env)
    assert decide(p, "execute", command="true").refusal
    assert "another hard link" in asker.asked[-1].reason
