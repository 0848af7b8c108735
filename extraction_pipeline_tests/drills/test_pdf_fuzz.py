"""Fuzz: mutated real and synthetic PDFs never crash or hang the caller.

Every case must end as a parse result or a clean, one-line PermanentError within the timeout.
Mutations: truncation, byte flips, garbage written over a stream, a region deleted, a region
duplicated. Seeded, so a failure names a reproducible case. The cases go through the reader as
a batch's documents do (``run_each``: one child reads PDFs one after another and a new child
takes the rest after each failure), so a damaged PDF must also leave the next one unharmed.
"""

from __future__ import annotations

import random
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from extraction_pipeline.core.pdf.engine import EngineOptions
from extraction_pipeline.core.pdf.isolation import Outcome, ParseTimeout, run_each
from extraction_pipeline_tests.support import pdf_samples

CASES = 210
TIMEOUT_SECONDS = 60
CORPUS_BASE = pdf_samples.CORPUS / "pdf" / "3929816.pdf"  # 4 pages, with tables


def _mutate(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    kind = rng.choice(["truncate", "flip", "garbage-stream", "delete", "duplicate"])
    n = len(data)
    if kind == "truncate":
        return kind, data[: rng.randrange(1, n)]
    if kind == "flip":
        buffer = bytearray(data)
        for _ in range(rng.randint(1, 40)):
            buffer[rng.randrange(n)] = rng.randrange(256)
        return kind, bytes(buffer)
    if kind == "garbage-stream":
        start = data.find(b"stream", rng.randrange(n // 2))
        start = start if start != -1 else rng.randrange(n)
        length = rng.randint(16, 4096)
        return kind, data[:start] + rng.randbytes(length) + data[start + length :]
    start, length = rng.randrange(n), rng.randint(1, 2048)
    if kind == "delete":
        return kind, data[:start] + data[start + length :]
    return kind, data[:start] + data[start : start + length] * rng.randint(2, 5) + data[start:]


@pytest.mark.fuzz
def test_two_hundred_mutated_pdfs_end_cleanly(tmp_path: Path) -> None:
    bases = [pdf_samples.good(tmp_path, 1).read_bytes(), pdf_samples.good(tmp_path, 2).read_bytes()]
    if CORPUS_BASE.exists():
        bases.append(CORPUS_BASE.read_bytes())
    rng = random.Random(20261130)  # noqa: S311  (reproducible mutations, not cryptography)
    cases = []
    for number in range(CASES):
        kind, data = _mutate(bases[number % len(bases)], rng)
        path = tmp_path / f"case-{number:03d}-{kind}.pdf"
        path.write_bytes(data)
        cases.append(path)

    bad: list[tuple[str, str]] = []

    def verdict(path: Path, outcome: Outcome) -> str:
        if isinstance(outcome.error, ParseTimeout):
            bad.append((path.name, "timeout"))
            return "timeout"
        if outcome.error is not None:
            message = str(outcome.error)
            assert message and "\n" not in message and "Traceback" not in message, (path.name, message)
            if message.startswith("parser crashed"):
                bad.append((path.name, message))
                return "crash"
            return "error"
        assert outcome.value is not None
        assert isinstance(outcome.value["pages_text"], list) and outcome.value["pages_text"], path.name
        return "parsed"

    def parse(share: list[Path]) -> list[str]:
        outcomes = run_each(share, timeout_seconds=TIMEOUT_SECONDS, limits=EngineOptions())
        assert len(outcomes) == len(share)
        return [verdict(path, outcome) for path, outcome in zip(share, outcomes, strict=True)]

    with ThreadPoolExecutor(max_workers=2) as pool:  # two readers at once, as two runs would
        outcomes = Counter(v for verdicts in pool.map(parse, [cases[0::2], cases[1::2]]) for v in verdicts)
    print(f"\nfuzz outcomes over {CASES} cases: {dict(outcomes)}")
    assert sum(outcomes.values()) == CASES
    assert bad == [], bad
    assert outcomes["parsed"] > 0 and outcomes["error"] > 0  # both paths were exercised
