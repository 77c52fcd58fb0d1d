"""The environment helper: one process inside a container, on an SSH host or in an HPC image,
that starts commands and touches files there for the agent, over one stdio connection.

Started once per environment by the agent (`talaria.tools.environments.mux`) as
`python3 -I -S -u -c BOOT` through the environment's own door (`podman exec -i`, `ssh`,
`apptainer exec`); BOOT reads this file's source from stdin. Standard library only and
Python 3.8 syntax: it runs under whatever python3 the environment has.

Wire (both directions): frames of a 9-byte header `>BII` (kind, stream, length) + payload.
Kinds: 1 JSON control (stream 0), 2 DATA for a stream, 3 EOF of a stream. Streams are numbered
by the agent. A control message names the streams it uses:

    {"op": "init", "modules": {NAME: SOURCE}, "reply": S}        -> facts about this place
    {"op": "spawn", "argv": [...] | "command": SHELL TEXT, "cwd": DIR, "env": {...},
     "stdin": S | null, "stdout": S, "stderr": S | null (merged), "status": S,
     "channel": S | null (a socketpair whose fd replaces "{fd}" in argv),
     "files": {NAME: TEXT} (written to a private dir that replaces "{dir}" in argv, cwd
     and env values),
     "scrub": {"keep": [GLOB], "secret": [WORD], "pass": [GLOB]} | null,
     "report": [NAME] (files of the private dir to send back with the status)}
    {"op": "signal", "status": S, "sig": N}                      -> the process group of S
    {"op": "call", "fn": "read" | "write" | "stat" | "search" | "changed" | "now" | "mkdir",
     "args": {...},
     "reply": S}                                                 -> {"ok": ...} or {"error", "type"}
    {"op": "tar_out", "root": DIR, "paths": [REL] | null, "reply": S}  -> tar bytes on S
    {"op": "tar_in", "root": DIR, "stream": S, "reply": S2}     <- tar bytes on S

A spawned process runs in its own process group; its status stream gets
`{"code": N | null, "signal": N | null, "report": {NAME: TEXT | null}}`
(or `{"error", "type"}` when it
could not start) once it exited and its output
ended (children that keep a pipe open are killed with the group after DRAIN_S). When the
agent's end closes (the agent exited, the connection dropped), every group is killed and the
helper exits: nothing the agent started outlives it.
"""

import contextlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import types
import typing  # noqa: F401 -- in type comments (Python 3.8 syntax)
from fnmatch import fnmatchcase

HEADER = struct.Struct(">BII")
JSON, DATA, EOF = 1, 2, 3
CHUNK = 1 << 16
DRAIN_S = 0.5
REPORT_MAX = (1 << 20) + 1

_out_lock = threading.Lock()
_groups = {}  # type: dict[int, int]  # status stream -> pid (its own process group)
_groups_lock = threading.Lock()
_modules = {}  # type: dict[str, types.ModuleType]
_scratch = ""  # made by main(): importing this module (for its constants) creates nothing
_stdin_streams = {}  # type: dict[int, tuple[typing.Any, bool]]  # stream -> (file or socket, is it one)


def send(kind, stream, payload=b""):
    data = HEADER.pack(kind, stream, len(payload)) + payload
    with _out_lock:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(1, view):]
        except OSError:  # the agent is gone
            shutdown()


def reply(stream, obj):
    send(DATA, stream, json.dumps(obj).encode())
    send(EOF, stream)


def shutdown():
    """Kill every process group we started, remove our scratch dir, exit."""
    with _groups_lock:
        pids = list(_groups.values())
    for pid in pids:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
    shutil.rmtree(_scratch, ignore_errors=True)
    os._exit(0)


def pump(fd_or_sock, stream):
    """Forward a pipe or socket to the agent as DATA frames, then EOF."""
    try:
        while True:
            if isinstance(fd_or_sock, socket.socket):
                data = fd_or_sock.recv(CHUNK)
            else:
                data = os.read(fd_or_sock, CHUNK)
            if not data:
                break
            send(DATA, stream, data)
    except OSError:
        pass
    send(EOF, stream)


def scrubbed(env, rules):
    keep, secret, passthrough = rules.get("keep", []), rules.get("secret", []), rules.get("pass", [])

    def match(name, patterns):
        return any(fnmatchcase(name, p) for p in patterns)

    return {k: v for k, v in env.items()
            if match(k, passthrough) or (match(k, keep) and not any(w in k.upper() for w in secret))}


def spawn(msg):
    status = msg["status"]
    env = dict(os.environ)
    if msg.get("scrub") is not None:
        env = scrubbed(env, msg["scrub"])
    private = tempfile.mkdtemp(dir=_scratch)
    env.update((k, v.replace("{dir}", private)) for k, v in (msg.get("env") or {}).items())
    for name, text in (msg.get("files") or {}).items():
        with open(os.path.join(private, name), "w") as f:
            f.write(text)
    channel = theirs = None
    pass_fds = ()  # type: tuple[int, ...]
    if msg.get("channel") is not None:
        channel, theirs = socket.socketpair()
        pass_fds = (theirs.fileno(),)
    if msg.get("command") is not None:
        shell = shutil.which("bash") or "/bin/sh"
        # Over SSH bash sources ~/.bashrc again for every command when SHLVL < 1 (its
        # "run by sshd" rule; 0.3 s with pyenv here). The helper's environment already has
        # what the login's bashrc set.
        env["SHLVL"] = str(max(int(env.get("SHLVL") or 0), 1)) if env.get("SHLVL", "0").isdigit() else "1"
        text = msg["command"]
        if "prologue" in (msg.get("files") or {}) and not shell.endswith("bash"):
            text = f". {quote(os.path.join(private, 'prologue'))}\n{text}"  # sh has no BASH_ENV
        argv = [shell, "-c", text]
    else:
        fd = str(pass_fds[0]) if pass_fds else ""
        argv = [a.replace("{fd}", fd).replace("{dir}", private) for a in msg["argv"]]
    try:
        proc = subprocess.Popen(
            argv, cwd=(msg.get("cwd") or "").replace("{dir}", private) or None, env=env,
            pass_fds=pass_fds,
            stdin=subprocess.PIPE if msg.get("stdin") is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if msg.get("stderr") is not None else subprocess.STDOUT,
            start_new_session=True)
    except OSError as exc:
        shutil.rmtree(private, ignore_errors=True)
        for key in ("stdout", "stderr", "channel"):
            if msg.get(key) is not None:
                send(EOF, msg[key])
        reply(status, {"code": None, "signal": None, "error": str(exc), "type": type(exc).__name__})
        return
    finally:
        if theirs is not None:
            theirs.close()
    with _groups_lock:
        _groups[status] = proc.pid
    assert proc.stdout is not None
    readers = [threading.Thread(target=pump, args=(proc.stdout.fileno(), msg["stdout"]), daemon=True)]
    if proc.stderr is not None:
        readers.append(threading.Thread(target=pump, args=(proc.stderr.fileno(), msg["stderr"]),
                                        daemon=True))
    if channel is not None:
        _stdin_streams[msg["channel"]] = (channel, True)
        threading.Thread(target=pump, args=(channel, msg["channel"]), daemon=True).start()
    if msg.get("stdin") is not None:
        _stdin_streams[msg["stdin"]] = (proc.stdin, False)
    for t in readers:
        t.start()
    threading.Thread(target=wait, args=(proc, readers, msg, private), daemon=True).start()


def wait(proc, readers, msg, private):
    code = proc.wait()
    for t in readers:
        t.join(DRAIN_S)
    with contextlib.suppress(OSError):  # background children die with the command, as locally
        os.killpg(proc.pid, signal.SIGKILL)
    for t in readers:
        t.join(DRAIN_S)
    for key in ("stdin", "channel"):
        entry = _stdin_streams.pop(msg.get(key), None)
        if entry is not None:
            with contextlib.suppress(OSError):
                entry[0].close()
    with _groups_lock:
        _groups.pop(msg["status"], None)
    status = {"code": code if code >= 0 else None, "signal": -code if code < 0 else None}
    if msg.get("report"):
        status["report"] = {name: read_report(os.path.join(private, name)) for name in msg["report"]}
    shutil.rmtree(private, ignore_errors=True)
    reply(msg["status"], status)


def read_report(path):
    """A file the command left in its private dir (its shell state), or None."""
    try:
        with open(path, "rb") as f:
            return f.read(REPORT_MAX).decode("utf-8", "surrogateescape")
    except OSError:
        return None


def quote(text):
    return "'" + text.replace("'", "'\"'\"'") + "'"


def feed(stream, data):
    """DATA from the agent: to a process's stdin or a kernel's channel."""
    entry = _stdin_streams.get(stream) if data is not None else _stdin_streams.pop(stream, None)
    if entry is None:
        return
    target, is_socket = entry
    try:
        if data is None:
            if is_socket:
                target.shutdown(socket.SHUT_WR)
            else:
                target.close()
        elif is_socket:
            target.sendall(data)
        else:
            target.write(data)
            target.flush()
    except OSError:
        pass


def call(msg):
    fn, args = msg["fn"], msg.get("args") or {}
    try:
        files, walk = _modules["files"], _modules["walk"]
        if fn == "read":
            result = files.read_text_sync(args["path"])
        elif fn == "write":
            files.write_text_sync(args["path"], args["text"])
            result = None
        elif fn == "stat":
            st = os.stat(args["path"])
            result = {"dir": os.path.isdir(args["path"]), "size": st.st_size, "mtime": st.st_mtime}
        elif fn == "search":
            result = search(walk, args)
        elif fn == "changed":
            result = walk.changed(args["root"], args["since"], args.get("skip") or [])
        elif fn == "now":
            result = __import__("time").time()
        elif fn == "mkdir":
            os.makedirs(os.path.expanduser(args["path"]), exist_ok=True)
            result = os.path.realpath(os.path.expanduser(args["path"]))
        else:
            raise ValueError(f"unknown call {fn!r}")
        reply(msg["reply"], {"ok": result})
    except Exception as exc:
        reply(msg["reply"], {"error": str(exc), "type": type(exc).__name__})


def search(walk, args):
    import re
    import time

    root = os.path.normpath(args["root"])
    if not os.path.exists(root):
        raise FileNotFoundError(f"No such file or directory: {root}")
    globs = args.get("globs")
    deadline = time.monotonic() + args.get("timeout", 60.0)
    if args["target"] == "files":
        found = walk.py_files(root, args["names"], globs, deadline, args["max"])
    else:
        found = walk.py_content(root, re.compile(args["pattern"]), globs, deadline, args["max"])
    if not os.path.isdir(root):
        found = [(".", line, text) for _, line, text in found]
    return found



class StreamWriter:
    def __init__(self, stream):
        self.stream = stream

    def write(self, data):
        for i in range(0, len(data), CHUNK):
            send(DATA, self.stream, bytes(data[i:i + CHUNK]))
        return len(data)

    def flush(self):
        pass


def tar_out(msg):
    import tarfile

    try:
        with tarfile.open(fileobj=StreamWriter(msg["reply"]), mode="w|") as tar:  # type: ignore[call-overload]
            for rel in msg.get("paths") or ["."]:
                tar.add(os.path.join(msg["root"], rel), arcname=rel)
    except Exception as exc:  # the agent sees a truncated archive and this line on the reply
        sys.stderr.write(f"talaria-helper: tar_out: {exc}\n")
    send(EOF, msg["reply"])


def tar_in(msg, reader):
    import tarfile

    try:
        reader = os.fdopen(reader, "rb")
        os.makedirs(msg["root"], exist_ok=True)
        with tarfile.open(fileobj=reader, mode="r|") as tar:
            for member in tar:
                if member.name.startswith("/") or ".." in member.name.split("/"):
                    continue  # never outside the root
                tar.extract(member, msg["root"])
        reply(msg["reply"], {"ok": None})
    except Exception as exc:
        reply(msg["reply"], {"error": str(exc), "type": type(exc).__name__})


def init(msg):
    for name, source in msg.get("modules", {}).items():
        module = types.ModuleType("talaria_" + name)
        exec(compile(source, f"<talaria {name}>", "exec"), module.__dict__)
        _modules[name] = module
    reply(msg["reply"], {
        "python": list(sys.version_info[:3]), "pid": os.getpid(), "cwd": os.getcwd(),
        "home": os.path.expanduser("~"), "shell": shutil.which("bash") or "/bin/sh",
        "rsync": bool(shutil.which("rsync")), "scratch": _scratch,
    })


def control(msg):
    op = msg.get("op")
    if op == "init":
        init(msg)
    elif op == "spawn":
        spawn(msg)
    elif op == "signal":
        with _groups_lock:
            pid = _groups.get(msg["status"])
        if pid is not None:
            with contextlib.suppress(OSError):
                os.killpg(pid, msg["sig"])
    elif op == "call":
        threading.Thread(target=call, args=(msg,), daemon=True).start()
    elif op == "tar_out":
        threading.Thread(target=tar_out, args=(msg,), daemon=True).start()
    elif op == "tar_in":  # the archive arrives as DATA on msg["stream"], through a pipe
        r, w = os.pipe()
        _stdin_streams[msg["stream"]] = (os.fdopen(w, "wb"), False)
        threading.Thread(target=tar_in, args=(msg, r), daemon=True).start()


def read_exact(stdin, n):
    data = stdin.read(n)
    if data is None or len(data) < n:
        shutdown()
    return data


def main():
    global _scratch
    _scratch = tempfile.mkdtemp(prefix="talaria-helper-")
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)  # the end of stdin is our signal to go
    stdin = sys.stdin.buffer
    while True:
        kind, stream, length = HEADER.unpack(read_exact(stdin, HEADER.size))
        payload = read_exact(stdin, length) if length else b""
        if kind == JSON:
            try:
                control(json.loads(payload))
            except Exception as exc:  # a bad message must not end the session
                sys.stderr.write(f"talaria-helper: {type(exc).__name__}: {exc}\n")
        else:
            feed(stream, payload if kind == DATA else None)


BOOT = ("import sys;n=int(sys.stdin.buffer.readline());"
        "exec(compile(sys.stdin.buffer.read(n),'talaria-helper','exec'),{'__name__':'__main__'})")
"""The `-c` program that reads the helper's source from stdin and runs it."""

if __name__ == "__main__":
    main()
