"""Child-process entry point: ``python -m extraction_pipeline.core.pdf.child OUT SPEC``, started
through isolation.py (which caps its memory and CPU time first).

SPEC is a JSON file: {"task": "parse" | "inspect" | "text", "limits": EngineOptions, "pdfs":
[path, ...]}. For each PDF in order, one JSON line is appended to OUT as soon as it is done:
{"ok": result} or {"error": reason}. Exits 0 when all are done, or 3 right after the first that
failed. A PDF the child dies on (a crash, a signal, the timeout) has no line: the parent names it.
Either way the parent starts a new child for the rest. Kept free of heavy imports until it runs.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from extraction_pipeline.core.pdf.engine import EngineOptions, ParseFailure, inspect_pdf, parse_pdf, read_text
from extraction_pipeline.core.pdf.isolation import EXIT_STOPPED, out_of_memory

TASKS: dict[str, Callable[[Path, EngineOptions], dict[str, Any]]] = {
    "parse": parse_pdf,
    "inspect": inspect_pdf,
    "text": read_text,
}


def _answer(task: Callable[[Path, EngineOptions], dict[str, Any]], pdf: Path, limits: EngineOptions) -> dict[str, Any]:
    try:
        return {"ok": task(pdf, limits)}
    except ParseFailure as exc:  # MuPDF's refused allocation surfaces as damage: say what it was
        return {"error": out_of_memory(exc) or str(exc)}
    except Exception as exc:  # a bug, an unforeseen library error or the memory cap: one clean line
        first_line = (str(exc).strip().splitlines() or [""])[0][:300]
        return {"error": out_of_memory(exc) or f"parser failed ({type(exc).__name__}: {first_line})"}


def answer_line(answer: dict[str, Any]) -> str:
    """One answer as the parent reads it (isolation.read_answers): ASCII JSON, so a page's U+2028 or
    U+0085 is never a line break, whatever the reader splits on."""
    return json.dumps(answer, ensure_ascii=True) + "\n"


def main(argv: list[str]) -> int:
    out, spec = Path(argv[0]), json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    pdfs = [Path(path) for path in spec["pdfs"]]
    task, limits = TASKS[spec["task"]], EngineOptions(**spec["limits"])
    with out.open("a", encoding="utf-8") as results:
        for pdf in pdfs:
            answer = _answer(task, pdf, limits)
            results.write(answer_line(answer))
            results.flush()  # the parent reads progress, and what is done survives a later kill
            if "error" in answer:
                # A PDF that failed may have left MuPDF's memory exhausted or its state damaged:
                # the next PDF gets a fresh child (the parent starts one for the rest).
                return EXIT_STOPPED
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
