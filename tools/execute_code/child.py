"""The execute_code kernel: one per session, inside the sandbox, under the project's interpreter.

Run as `python -I -S -u child.py --fd N --tag TAG`. Standard library only and Python 3.8
syntax: it runs under whatever interpreter the project uses, from a read-only location.
`-S` because `site` costs most of a cold start (one editable install's .pth alone took 20 ms
here): `LateSite` runs it once the first cell is done, or at the first import that needs it;
a kernel started ahead of its first script (`site_now`) runs it at once, while it waits.

Wire: newline-delimited JSON frames over the inherited socket `N` (one end of a socketpair;
there is no path anyone else could connect to):

    agent -> kernel   {"op": "init", "stubs": SOURCE, "idle": SECONDS, "path": [DIR, ...],
                       "site_now": BOOL}
                      {"op": "run", "cell": N, "code": SOURCE, "marker": HEX,
                       "stubs"?: SOURCE (a new hermes_tools, loaded before the cell)}
                      {"op": "result", "id": K, "result": {...}}  or  {..., "error": "..."}
    kernel -> agent   {"op": "call", "id": K, "cell": N, "tool": NAME, "args": {...}}
                      {"op": "done", "cell": N, "exit_code": INT, "error": "Type: msg" | null}

`done` carries `"tmp_full": BYTES` (TMPDIR's size) when the cell left TMPDIR full.

`hermes_tools` is built in memory from SOURCE, never written to disk. Cells run in one
persistent namespace. stdout and stderr are the process's own fds (pipes to the agent, so a
subprocess's output is caught too); after a cell the kernel writes the cell's marker to both,
which tells the agent where that cell's output ends. When the socket closes (the agent exited,
even by `kill -9`) or nothing arrives for `idle` seconds, the kernel kills its process group.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import signal
import site
import sys
import threading
import types

try:
    from _queue import Empty, SimpleQueue  # `queue` itself costs a cold start ~0.5 ms
except ImportError:  # not CPython
    from queue import Empty, SimpleQueue

TMP_FULL_BYTES = 1024 * 1024
"""Less free space than this in TMPDIR after a cell: reported as full."""


def die() -> None:
    """End the kernel and everything the scripts started in its process group."""
    try:
        os.killpg(0, signal.SIGKILL)
    finally:
        os._exit(1)


class LateSite:
    """`site.main()` (venv, site-packages, .pth files) without paying for it in a cold start:
    it runs after the first cell, or earlier when an import misses a module outside the
    standard library (a meta path finder of last resort). No thread: a background `site`
    would race the script's imports for sys.path and for module locks."""

    def __init__(self) -> None:
        self.done = False
        site.setquit()  # exit() and quit() exist from the first cell
        if not hasattr(sys, "stdlib_module_names"):  # Python < 3.10: no way to tell, go now
            self.run()
        else:
            sys.meta_path.append(self)

    def run(self) -> None:
        if not self.done:
            self.done = True
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(self)
            site.main()

    def find_spec(self, name, path=None, target=None):
        if self.done or name.partition(".")[0] in sys.stdlib_module_names:
            return None  # an optional stdlib import (_winapi...) just misses
        self.run()
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find else None
            if spec is not None:
                return spec
        return None


class Channel:
    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.control: SimpleQueue[dict] = SimpleQueue()
        self.results: SimpleQueue[dict] = SimpleQueue()
        self.send_lock = threading.Lock()
        self.call_lock = threading.Lock()
        self.cell = 0
        self.seq = 0

    def send(self, frame: dict) -> None:
        data = memoryview((json.dumps(frame, default=str) + "\n").encode())
        with self.send_lock:
            try:
                while data:
                    data = data[os.write(self.fd, data):]
            except OSError:
                die()

    def read_forever(self) -> None:
        """The only reader of the socket; its end (EOF) is the parent-death watchdog."""
        buf = b""
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except OSError:
                data = b""
            if not data:
                die()
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                frame = json.loads(line)
                (self.results if frame.get("op") == "result" else self.control).put(frame)

    def call(self, tool: str, args: dict) -> dict:
        """Run a tool through the agent; returns its result dict."""
        with self.call_lock:  # one call in flight: replies come back in order
            self.seq += 1
            self.send({"op": "call", "id": self.seq, "cell": self.cell, "tool": tool, "args": args})
            while True:
                frame = self.results.get()
                if frame.get("id") == self.seq:
                    break
        if "error" in frame:
            return {"error": frame["error"]}
        result = frame.get("result")
        return result if isinstance(result, dict) else {"error": "the agent sent no result"}


def load_stubs(chan: Channel, source: str) -> None:
    module = types.ModuleType("hermes_tools")
    module.__dict__["_call"] = chan.call
    exec(compile(source, "<hermes_tools>", "exec"), module.__dict__)
    sys.modules["hermes_tools"] = module


SOURCES: dict = {}
"""Every cell's source by file name, for tracebacks through functions of earlier cells."""


def format_error(exc: BaseException) -> str:
    import linecache
    import traceback  # only when a script fails: they cost a cold start 8 ms

    for name, source in SOURCES.items():
        linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    tb = exc.__traceback__.tb_next if exc.__traceback__ else None  # drop the kernel's frame
    sys.stderr.write("".join(traceback.format_exception(type(exc), exc, tb)))
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


def run_cell(chan: Channel, namespace: dict, frame: dict) -> None:
    chan.cell = frame["cell"]
    if "stubs" in frame:  # the tools scripts may call changed (an MCP server came up)
        load_stubs(chan, frame["stubs"])
    name = f"<script {chan.cell}>"
    source = SOURCES[name] = frame["code"]
    exit_code, error = 0, None
    try:
        exec(compile(source, name, "exec"), namespace)
    except SystemExit as exc:
        if isinstance(exc.code, int) or exc.code is None:
            exit_code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            exit_code = 1
    except BaseException as exc:  # the script's error, shown to the model as a traceback
        exit_code, error = 1, format_error(exc)
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a script may have replaced or closed them
                stream.flush()
    marker = frame["marker"].encode()
    for fd in (1, 2):
        with contextlib.suppress(OSError):  # the script closed it: the agent waits a moment
            os.write(fd, marker)
    done = {"op": "done", "cell": chan.cell, "exit_code": exit_code, "error": error}
    size = tmp_full()
    if size:
        done["tmp_full"] = size
    chan.send(done)


def tmp_full() -> int:
    """TMPDIR's size when less than TMP_FULL_BYTES of it are free, else 0."""
    try:
        st = os.statvfs(os.environ.get("TMPDIR") or "/tmp")
    except OSError:
        return 0
    return st.f_blocks * st.f_frsize if st.f_bavail * st.f_frsize < TMP_FULL_BYTES else 0


def main(argv: list) -> None:
    fd = int(argv[argv.index("--fd") + 1])
    os.set_blocking(fd, True)
    sys.argv = ["<execute_code>"]
    chan = Channel(fd)
    threading.Thread(target=chan.read_forever, name="talaria-channel", daemon=True).start()
    init = chan.control.get()
    sys.path[:0] = init.get("path") or []
    late_site = LateSite()
    if init.get("site_now"):
        late_site.run()
    load_stubs(chan, init["stubs"])
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    idle = init.get("idle")
    while True:
        try:
            frame = chan.control.get(timeout=idle)
        except Empty:
            die()
        if frame.get("op") == "run":
            run_cell(chan, namespace, frame)
            late_site.run()


if __name__ == "__main__":
    main(sys.argv)
