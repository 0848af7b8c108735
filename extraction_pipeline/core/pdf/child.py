"""Child-process entry point: ``python -m extraction_pipeline.core.pdf.child PDF OUT.json LIMITS``.

Writes {"ok": result} or {"error": reason} to OUT.json and exits 0 or 3. Anything else (a crash,
a signal) is reported by the parent as a crash. Kept free of heavy imports until it runs.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from extraction_pipeline.core.pdf.engine import EngineOptions, ParseFailure, parse_pdf

EXIT_PARSE_FAILURE = 3


def _write(out: Path, payload: dict[str, object]) -> None:
    tmp = out.with_suffix(".partial")
    tmp.write_text(json.dumps(payload, ensure_ascii=False))
    os.replace(tmp, out)


def main(argv: list[str]) -> int:
    pdf, out, limits_json = Path(argv[0]), Path(argv[1]), json.loads(argv[2])
    try:
        result = parse_pdf(pdf, EngineOptions(**limits_json))
    except ParseFailure as exc:
        _write(out, {"error": str(exc)})
        return EXIT_PARSE_FAILURE
    except Exception as exc:  # a bug or an unforeseen library error: still one clean line
        first_line = (str(exc).strip().splitlines() or [""])[0][:300]
        _write(out, {"error": f"parser failed ({type(exc).__name__}: {first_line})"})
        return EXIT_PARSE_FAILURE
    _write(out, {"ok": result})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
