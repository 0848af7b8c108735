"""PDF children forked from a warm process instead of started as new interpreters.

A cold PDF child (pdf/isolation.py) costs about 0.35 CPU-s, of which reading the PDF is 0.01-0.02:
the rest is starting Python, importing this package and PyMuPDF. A process that starts several
(a batch's registration and parsing, the review pages' images, the tests) asks its own warm
server instead: a process started once that has imported those and forks one child per request.

Each forked child is set up as ``python -m extraction_pipeline.core.pdf.isolation`` sets up a cold
one, so the isolation is the same: a session and process group of its own (the caller kills the
group on timeout), the memory and CPU caps (pdf/capped.py), stdin from /dev/null and stdout and
stderr into the caller's output file (a crash's reason is its last line), the caller's working
directory and environment, and its exit status (a signal as a negative number, as Popen reports
it) passed back through a pipe once the server has reaped it. The server holds no thread,
connection, open PDF or MuPDF document: it imports and forks.

The server is one per process (not shared with the processes it forks or with forked copies of
its owner), is started at its second child (most processes that read a PDF read one: a run
worker, a command; the first child starts cold), exits when its owner is gone (end of file on its
socket) or after ``IDLE_SECONDS`` without work, and is replaced when the code it imported has
changed on disk. Whatever goes wrong with it, ``start`` returns None and the caller starts the
child cold; ``EXTRACTION_PDF_WARM=0`` always does. It is not multiprocessing's forkserver: that
is one per process with one list of modules to import, and it is defs/run_workers.py's (and the
tests' support/processes.py's).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from extraction_pipeline.core.pdf.process_groups import group_alive

ENABLED = "EXTRACTION_PDF_WARM"  # "0": always start children cold
# What a warm child may run: the modules the server has imported (and whose code it checks).
MODULES = ("extraction_pipeline.core.pdf.child", "extraction_pipeline.core.review.page_image")
PACKAGE = "extraction_pipeline"
IDLE_SECONDS = 120.0
READY_TIMEOUT_SECONDS = 30.0
MAX_FAILURES = 3  # servers that failed before a process gives up on them and starts its children cold
_MESSAGE_BYTES = 1 << 20
_UNKNOWN_EXIT = 255  # the server died before it could report the child's end


class WarmChild:
    """A forked child as run_child uses a Popen: pid, poll, wait, returncode."""

    def __init__(self, pid: int, status: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._status = status  # read end of the pipe the server writes the exit status to

    def poll(self) -> int | None:
        if self.returncode is None:
            self._check(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(f"warm pdf child {self.pid}", timeout or 0)
            self._check(1.0 if left is None else min(left, 1.0))
        return self.returncode

    def _check(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the exit status the server writes when it reaps the
        child. Should the server die first, the child is over once its process group is gone."""
        if self._status < 0:
            if not group_alive(self.pid):
                self.returncode = _UNKNOWN_EXIT
            else:
                time.sleep(min(timeout, 0.05))
            return
        with selectors.DefaultSelector() as selector:
            selector.register(self._status, selectors.EVENT_READ)
            if not selector.select(timeout):
                return
        data = b""
        while chunk := os.read(self._status, 64):
            data += chunk
        os.close(self._status)
        self._status = -1
        with contextlib.suppress(ValueError):
            self.returncode = int(data.decode())

    def __enter__(self) -> WarmChild:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.wait()


def _send(sock: socket.socket, payload: dict[str, Any], fds: list[int] | None = None) -> None:
    data = json.dumps(payload).encode()
    if fds:
        socket.send_fds(sock, [data], fds)
    else:
        sock.send(data)


# --- the owner's side -----------------------------------------------------------------------


class _Server:
    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.owner = os.getpid()
        self.sock = ours
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", __name__, str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a terminal's ^C or a kill of the owner's group: the owner's to handle
            )
        finally:
            theirs.close()
        try:
            ours.settimeout(READY_TIMEOUT_SECONDS)
            ready = json.loads(ours.recv(_MESSAGE_BYTES) or b"{}")
            ours.settimeout(None)
            if "files" not in ready:
                raise OSError("the warm PDF server did not start")
        except (OSError, ValueError):
            self.close()
            raise
        self.files: dict[str, int] = ready["files"]

    def current(self) -> bool:
        """Whether the code the server imported is still what is on disk."""
        for path, mtime in self.files.items():
            try:
                if os.stat(path).st_mtime_ns != mtime:
                    return False
            except OSError:
                return False
        return self.process.poll() is None

    def fork(self, request: dict[str, Any], output: int) -> WarmChild:
        read, write = os.pipe()
        try:
            _send(self.sock, request, [output, write])
        finally:
            os.close(write)
        reply = json.loads(self.sock.recv(_MESSAGE_BYTES) or b"{}")
        if "pid" not in reply:
            os.close(read)
            raise OSError(f"the warm PDF server did not fork: {reply.get('error', 'it is gone')}")
        return WarmChild(int(reply["pid"]), read)

    def close(self) -> bool:
        """Stop the server; False when it had failed (not merely exited when idle)."""
        self.sock.close()  # its end of file: the server exits
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        return self.process.returncode == 0


_lock = threading.Lock()
_server: _Server | None = None
_failures = 0
_asked = 0  # children this process has asked for: the first starts cold (one child needs no server)


def start(memory_mb: int, cpu_seconds: int, module: str, args: list[str], output: int) -> WarmChild | None:
    """Fork ``module`` with ``args`` from this process's warm server (started if need be), its
    stdout and stderr going to the file descriptor ``output``. None when warm children are off or
    the server cannot be had: start the child cold."""
    global _server, _failures, _asked
    if os.environ.get(ENABLED, "1") == "0" or module not in MODULES:
        return None
    _asked += 1
    if _asked == 1:
        return None  # a process that reads one PDF (a run worker, a command) is spared the server
    try:
        cwd = os.getcwd()
    except OSError:  # removed: a cold child inherits it as it is, a forked one could not
        return None
    request = {"argv": [str(memory_mb), str(cpu_seconds), module, *args], "cwd": cwd, "env": dict(os.environ)}
    with _lock:
        for _attempt in range(2):  # a server that has just exited (idle, or its code changed): a new one
            if _server is not None and (_server.owner != os.getpid() or not _server.current()):
                if _server.owner == os.getpid() and not _server.close():
                    _failures += 1
                _server = None
            if _failures >= MAX_FAILURES:
                return None
            if _server is None:
                try:
                    _server = _Server()
                except OSError:
                    _failures += 1
                    continue
            try:
                return _server.fork(request, output)
            except (OSError, ValueError):
                if not _server.close():
                    _failures += 1
                _server = None
        return None


def stop() -> None:
    """Stop this process's warm server (it exits on its own when this process ends)."""
    global _server
    with _lock:
        if _server is not None and _server.owner == os.getpid():
            _server.close()
        _server = None


def _forgotten_in_fork() -> None:
    """A forked copy of the owner has its own server when it needs one; the owner's socket is
    not its to use (nor to keep open: the server exits when its owner is gone)."""
    global _server, _lock, _failures, _asked
    _lock = threading.Lock()
    if _server is not None:
        with contextlib.suppress(OSError):
            _server.sock.close()
    _server, _failures, _asked = None, 0, 0


os.register_at_fork(after_in_child=_forgotten_in_fork)
atexit.register(stop)


# --- the server's side ----------------------------------------------------------------------


def _preload() -> dict[str, int]:
    """Import what the children import, then name the files whose change makes the server stale."""
    import importlib

    from extraction_pipeline.core.pdf.engine import import_pymupdf

    import_pymupdf()
    for name in ("bs4", "pymupdf.table", "extraction_pipeline.core.pdf.capped", *MODULES):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    files = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path and (module.__name__ == PACKAGE or module.__name__.startswith(PACKAGE + ".")):
            files[path] = os.stat(path).st_mtime_ns
    site = Path(sys.modules["pymupdf"].__file__ or "").resolve().parent.parent  # an upgrade changes it
    files[str(site)] = os.stat(site).st_mtime_ns
    return files


def serve(fd: int) -> None:
    """The server's loop: one request, one fork; one reaped child, one exit status reported."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=fd)
    try:
        files = _preload()
    except Exception as exc:
        _send(sock, {"error": f"{type(exc).__name__}: {exc}"})
        return
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    statuses: dict[int, int] = {}  # running child's pid -> write end of its status pipe
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    _send(sock, {"files": files})
    while True:
        events = selector.select(IDLE_SECONDS)
        if not events and not statuses:
            return  # idle: the owner starts a new one when it needs one
        for key, _mask in events:
            if key.fileobj == wake_r:
                os.read(wake_r, 4096)
                _reap(statuses)
                continue
            try:
                message, fds, _flags, _addr = socket.recv_fds(sock, _MESSAGE_BYTES, 2)
            except OSError:
                return
            if not message:
                return  # the owner is gone; its children are in sessions of their own, capped
            request = json.loads(message)
            output, status = fds
            try:
                pid = os.fork()
            except OSError as exc:
                os.close(output)
                os.close(status)
                _send(sock, {"error": str(exc)})
                continue
            if pid == 0:
                _child(request, output, [fd, wake_r, wake_w, status, *statuses.values()])
            os.close(output)
            statuses[pid] = status
            _send(sock, {"pid": pid})
        _reap(statuses)


def _reap(statuses: dict[int, int]) -> None:
    while statuses:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        write = statuses.pop(pid, None)
        if write is not None:
            with contextlib.suppress(OSError):
                os.write(write, str(os.waitstatus_to_exitcode(status)).encode())
            os.close(write)


def _child(request: dict[str, Any], output: int, inherited: list[int]) -> None:
    """In the forked child: become what ``python -m extraction_pipeline.core.pdf.isolation ARGV``
    would be, run it, and exit with its status. Never returns."""
    code = 1
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        for fd in inherited:
            with contextlib.suppress(OSError):
                os.close(fd)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.close(null)
        os.close(output)
        with contextlib.suppress(OSError):  # removed since: relative paths fail as they would cold
            os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        from extraction_pipeline.core.pdf.capped import run

        try:
            run(request["argv"])  # what isolation.main does in a cold child
            code = 0
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
        except KeyboardInterrupt:
            _flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        except BaseException:
            traceback.print_exc()
    finally:
        _flush()
        os._exit(code)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


if __name__ == "__main__":
    serve(int(sys.argv[1]))
