"""``MEMORY_MB CPU_SECONDS MODULE ARGS...``: cap this process's memory and CPU time, then run MODULE
as the program. What every PDF child does first, started cold (``python -m
extraction_pipeline.core.pdf.isolation``) or forked warm (pdf/warm.py)."""

from __future__ import annotations

import resource
import runpy
import sys

_MIB = 1024 * 1024


def run(argv: list[str]) -> None:
    memory_mb, cpu_seconds, module = int(argv[0]), int(argv[1]), argv[2]
    if memory_mb > 0:
        cap = memory_mb * _MIB
        resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))
    sys.argv = [module, *argv[3:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
