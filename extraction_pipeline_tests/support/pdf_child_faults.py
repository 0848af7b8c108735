"""A stand-in for a PDF child (``python -m ... FAULT OUT``) that misbehaves on request, to check
that a child forked warm (pdf/warm.py) is isolated and reported as a cold one is."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    fault, out = argv[0], Path(argv[1])
    facts = {
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "sid": os.getsid(0),
        "pgid": os.getpgid(0),
        "data": resource.getrlimit(resource.RLIMIT_DATA)[0],
        "cpu": resource.getrlimit(resource.RLIMIT_CPU)[0],
        "cwd": os.getcwd(),
        "env": os.environ.get("PDF_FAULT_MARK"),
        "stdin": sys.stdin.read(),
        "pymupdf": "pymupdf" in sys.modules,
    }
    out.write_text(json.dumps(facts))
    if fault == "exit":
        return int(argv[2])
    if fault == "raise":
        raise RuntimeError("the reader fell over")
    if fault == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    if fault == "spin":
        while True:
            pass
    if fault == "allocate":
        hoard = []
        while True:
            hoard.append(bytearray(16 * 1024 * 1024))
    if fault == "sleep":
        time.sleep(float(argv[2]))
    if fault == "hang":
        stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
        child = subprocess.Popen([sys.executable, "-c", stubborn])
        out.with_suffix(".pids").write_text(f"{os.getpid()} {child.pid}")
        time.sleep(600)
    print("done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
