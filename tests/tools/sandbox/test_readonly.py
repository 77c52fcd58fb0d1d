"""`SandboxSpec.readonly`: a path whose edit the user rejected cannot be changed from inside
the sandbox, however the command spells it, on every confining tier this machine has.

Real bash, real bwrap / Landlock. Each variant runs in a fresh sandbox over a fresh project;
what counts is the host's file afterwards, not the command's exit status.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from talaria.tools.sandbox import bwrap
from talaria.tools.sandbox import tiers as sandbox
from talaria.tools.sandbox.tiers import SandboxSpec, command_spec, prepare

TIERS = [t for t in ("bubblewrap", "landlock")
         if (t == "bubblewrap" and sandbox._bwrap_works()) or (t == "landlock" and sandbox.landlock_abi() >= 1)]
SECRET = "SECRET=1\n"

# Ways to change `.env` in the project root; `${f}v` keeps the name out of the command text.
ENV_VARIANTS = [
    "echo X > .env",
    "f=.en; echo X > ${f}v",
    "f=.en; echo X >> ${f}v",
    "python3 -c \"open('.e'+'nv','w').write('X')\"",
    "python3 -c \"import os; open('t','w').write('X'); os.replace('t', '.e'+'nv')\"",
    "f=.en; cp x ${f}v",
    "f=.en; ln -sf x ${f}v",
    "f=.en; ln -f x ${f}v",
    "f=.en; mv x ${f}v",
    "f=.en; mv -f ${f}v gone",
    "f=.en; rm -f ${f}v; echo X > ${f}v",
    "f=.en; sed -i s/SECRET/X/ ${f}v",
    "f=.en; truncate -s 0 ${f}v",
    "f=.en; dd if=x of=${f}v conv=notrunc",
    "f=.en; echo X > /proc/self/root$PWD/${f}v",
    "f=.en; cd .. && mv project moved && mkdir project && echo X > project/${f}v",
    "f=.en; cd .. && mv project moved && ln -s moved project",
]
# Ways to change `sub/deep/conf.py`, whose directories could be renamed away and recreated.
NESTED_VARIANTS = [
    "echo X > sub/deep/conf.py",
    "mv sub sub2 && mkdir -p sub/deep && echo X > sub/deep/conf.py",
    "mv sub/deep sub/d2 && mkdir sub/deep && echo X > sub/deep/conf.py",
    "rm -rf sub",
    "cd sub && mv deep ../d2",
]
# Ways to create `new/file.txt`, which did not exist when its creation was rejected.
MISSING_VARIANTS = [
    "mkdir -p new && echo X > new/file.txt",
    "mkdir new; touch new/file.txt",
    "python3 -c \"import os; os.makedirs('ne'+'w'); open('new/file.txt','w')\"",
    "mkdir /tmp/n && echo X > /tmp/n/file.txt && mv /tmp/n new",
]


@pytest.fixture(params=TIERS)
def tier(request: pytest.FixtureRequest) -> str:
    return request.param


def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "sub" / "deep").mkdir(parents=True)
    (root / ".env").write_text(SECRET)
    (root / "x").write_text("x\n")
    (root / "sub" / "deep" / "conf.py").write_text("A = 1\n")
    (root / "sub" / "other.py").write_text("B = 1\n")
    return root


def sh(tier: str, command: str, spec: SandboxSpec, cwd: Path) -> subprocess.CompletedProcess:
    prepared = prepare(["bash", "-c", command], spec, tier=tier)
    try:
        return subprocess.run(prepared.argv, cwd=cwd, capture_output=True, text=True,
                              timeout=30, start_new_session=True)
    finally:
        prepared.cleanup()


def state(root: Path) -> dict[str, object]:
    """What the user would see of the protected paths."""
    env = root / ".env"
    conf = root / "sub" / "deep" / "conf.py"
    return {
        "root is the project": root.is_dir() and not root.is_symlink(),
        ".env": env.read_text() if env.is_file() and not env.is_symlink() else "changed",
        ".env inode": env.stat().st_ino if env.exists() else None,
        "conf.py": conf.read_text() if conf.is_file() else "changed",
        "new/": (root / "new").exists(),
    }


def spec_for(root: Path) -> SandboxSpec:
    readonly = (root / ".env", root / "sub" / "deep" / "conf.py", root / "new" / "file.txt")
    return command_spec((root,), readonly=readonly)


@pytest.mark.parametrize("command", ENV_VARIANTS + NESTED_VARIANTS + MISSING_VARIANTS)
def test_a_readonly_path_cannot_be_changed(tier: str, tmp_path: Path, command: str) -> None:
    root = project(tmp_path)
    before = state(root)
    done = sh(tier, command, spec_for(root), root)
    assert state(root) == before, (done.returncode, done.stderr)


def test_the_rest_of_the_project_stays_writable(tier: str, tmp_path: Path) -> None:
    root = project(tmp_path)
    done = sh(tier, "echo y > x; echo C = 2 > sub/other.py; echo w > sub/w; mkdir sub/deep/more; "
                    "echo n > brand_new", spec_for(root), root)
    assert (root / "x").read_text() == "y\n" and (root / "sub" / "other.py").read_text() == "C = 2\n"
    # bwrap pins the directories that lead to a read-only path (new entries allowed); Landlock
    # freezes them (no new entries). The root is where `new/` may not appear: sealed on both.
    assert (root / "sub" / "w").exists() is (tier == "bubblewrap"), done.stderr
    assert (root / "sub" / "deep" / "more").exists() is (tier == "bubblewrap"), done.stderr
    assert not (root / "brand_new").exists()


def test_an_existing_readonly_file_leaves_its_directory_writable_on_bubblewrap(tmp_path: Path) -> None:
    if "bubblewrap" not in TIERS:
        pytest.skip("bubblewrap does not work here")
    root = project(tmp_path)
    spec = command_spec((root,), readonly=(root / ".env",))
    done = sh("bubblewrap", "echo n > brand_new && mkdir d && mv x y", spec, root)
    assert done.returncode == 0, done.stderr
    assert (root / "brand_new").exists() and (root / "d").is_dir() and (root / "y").exists()
    assert (root / ".env").read_text() == SECRET


def test_outside_the_project_nothing_is_writable(tier: str, tmp_path: Path) -> None:
    root = project(tmp_path)
    outside = Path("/var/tmp") / f"talaria-ro-{os.getpid()}-{tier}"
    host_tmp = tmp_path / "beside"
    try:
        done = sh(tier, f"echo X > {outside}; echo X > {host_tmp}; echo X > ~/talaria-ro-test",
                  command_spec((root,)), root)
        assert not outside.exists() and not host_tmp.exists(), done.stderr
        assert not (Path.home() / "talaria-ro-test").exists()
    finally:
        outside.unlink(missing_ok=True)
        (Path.home() / "talaria-ro-test").unlink(missing_ok=True)


def test_a_symlinked_readonly_path_protects_its_target(tier: str, tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / "real.env").write_text(SECRET)
    (root / "link.env").symlink_to(root / "real.env")
    done = sh(tier, "echo X > link.env; echo X > real.env",
              command_spec((root,), readonly=(root / "link.env",)), root)
    assert (root / "real.env").read_text() == SECRET, done.stderr


def test_a_directory_too_big_to_seal_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if "bubblewrap" not in TIERS:
        pytest.skip("bubblewrap does not work here")
    root = project(tmp_path)
    monkeypatch.setattr(bwrap, "MAX_SEALED_ENTRIES", 2)  # the root has 3, sub/ 2
    with pytest.raises(sandbox.SandboxError, match="more than 2 entries"):
        prepare(["true"], command_spec((root,), readonly=(root / "missing",)), tier="bubblewrap")
    prepare(["true"], command_spec((root,), readonly=(root / "sub" / "missing",)), tier="bubblewrap")


@pytest.mark.parametrize("command", ENV_VARIANTS + NESTED_VARIANTS + MISSING_VARIANTS)
def test_every_variant_does_change_an_unconfined_project(tmp_path: Path, command: str) -> None:
    """The variants are real attacks: unconfined (the rlimits tier), each one gets through."""
    root = project(tmp_path)
    before = state(root)
    done = sh("rlimits", command, spec_for(root), root)
    assert state(root) != before, (done.returncode, done.stderr)


def test_an_editor_can_spawn_the_sandboxed_command(tier: str, tmp_path: Path) -> None:
    """`local=False`: another process (the editor's terminal) starts the launcher, so the
    landlock tier must not insist on being our child; the protection is the same."""
    root = project(tmp_path)
    prepared = prepare(["bash", "-c", "f=.en; echo X > ${f}v; echo ran > x"], spec_for(root),
                       tier=tier, local=False)
    editor = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"
    try:
        done = subprocess.run([sys.executable, "-c", editor, *prepared.argv], cwd=root,
                              capture_output=True, text=True, timeout=30, start_new_session=True)
    finally:
        prepared.cleanup()
    assert (root / "x").read_text() == "ran\n", done.stderr
    assert (root / ".env").read_text() == SECRET
