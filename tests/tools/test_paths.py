"""Path policy on real directories and symlinks."""

from __future__ import annotations

import os
from pathlib import Path

from talaria.tools.paths import display, inside_roots, is_sensitive, resolve


def test_resolve_relative_home_and_dots(tmp_path: Path) -> None:
    assert resolve("a/b.py", tmp_path) == tmp_path / "a" / "b.py"
    assert resolve("./a/../b.py", tmp_path) == tmp_path / "b.py"
    assert resolve("/etc/hosts", tmp_path) == Path("/etc/hosts")
    assert resolve("~/x", tmp_path) == Path.home() / "x"
    assert resolve("../../etc/passwd", tmp_path).is_absolute()
    assert resolve("", tmp_path) == tmp_path


def test_dotdot_escape_is_outside(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    assert inside_roots(resolve("src/a.py", root), (root,))
    assert inside_roots(root, (root,))
    assert not inside_roots(resolve("../../etc/passwd", root), (root,))
    assert not inside_roots(tmp_path / "proj2" / "x", (root,))  # a prefix is not a parent


def test_symlink_out_of_root_is_outside(tmp_path: Path) -> None:
    root, outside = tmp_path / "proj", tmp_path / "secret"
    root.mkdir()
    outside.mkdir()
    (outside / "key.txt").write_text("k")
    (root / "link").symlink_to(outside)
    (root / "filelink").symlink_to(outside / "key.txt")
    assert not inside_roots(root / "link" / "key.txt", (root,))
    assert not inside_roots(root / "filelink", (root,))
    assert not inside_roots(root / "link" / "new-file", (root,))  # not created yet
    assert inside_roots(root / "link" / "key.txt", (root, outside))


def test_symlinked_root_still_contains_its_files(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real)
    assert inside_roots(tmp_path / "alias" / "a.py", (real,))
    assert inside_roots(real / "a.py", (tmp_path / "alias",))


def test_nul_byte_is_never_inside() -> None:
    assert not inside_roots(Path("/tmp/a\0b"), (Path("/tmp"),))


def test_sensitive_paths(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proj = tmp_path / "proj"
    yes = [
        proj / ".git" / "config",
        proj / ".git" / "hooks" / "pre-commit",
        proj / ".env",
        proj / ".env.local",
        home / ".ssh" / "config",
        home / ".aws" / "credentials",
        home / ".gnupg",
        proj / "deploy" / "id_ed25519",
        proj / "certs" / "server.pem",
        proj / "tls.key",
    ]
    no = [
        proj / "src" / "app.py",
        proj / ".gitignore",
        proj / ".github" / "workflows" / "ci.yml",
        proj / ".env.example",
        proj / "environment.py",
        proj / "id_ed25519.pub",
        tmp_path / "other" / ".ssh-notes",
    ]
    for p in yes:
        assert is_sensitive(p, home), p
    for p in no:
        assert not is_sensitive(p, home), p


def test_symlink_to_sensitive_is_sensitive(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text("Host *")
    proj = tmp_path / "proj"
    proj.mkdir()
    os.symlink(home / ".ssh" / "config", proj / "innocent.txt")
    assert is_sensitive(proj / "innocent.txt", home)


def test_display(tmp_path: Path) -> None:
    assert display(tmp_path / "a" / "b.py", tmp_path) == "a/b.py"
    assert display(tmp_path, tmp_path) == "."
    assert display(Path("/etc/hosts"), tmp_path) == "/etc/hosts"
