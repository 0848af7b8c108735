"""A batch closes with its workbook (issue: a batch never closes without its workbook).

On SQLite and PostgreSQL: the ``exporting`` state, failures recorded in words, old ledgers
upgraded. Through the real CLI: a workbook write SIGKILLed mid-save leaves the previous file or
nothing, and `batch export` completes a batch whose export failed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openpyxl
import pytest
from sqlalchemy import update

from extraction_pipeline.core.export.closing import (
    WARM_UP_MIN_LEFT,
    ExportError,
    ExportResult,
    worth_warming_up,
    write_batch_workbook,
)
from extraction_pipeline.core.files import PARTIAL_FOLDER, partial_path, remove_stale_partials
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger import items as states
from extraction_pipeline.core.ledger.batches import (
    close_if_done,
    create_batch,
    describe_state,
    get_batch,
    record_export_failure,
)
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.ledger.reopening import retry_failed
from extraction_pipeline.core.ledger.rows import BatchRow
from extraction_pipeline.core.ledger.schema import batches, ledger_meta
from extraction_pipeline.core.usage import Usage
from extraction_pipeline_tests.support.ledgers import add_documents


def _batch(ledger: Ledger, batch_id: int) -> BatchRow:
    batch = get_batch(ledger, batch_id)
    assert batch is not None
    return batch


def _finished_batch(ledger: Ledger, outcomes: int = 1) -> int:
    """A batch of one completed document with ``outcomes`` outcomes of four values each, closed."""
    [doc] = add_documents(ledger, 1)
    batch = create_batch(ledger, idempotency_key=f"k{doc}", project="p", user="u", document_ids=[doc]).id
    fields: dict[str, Any] = {}
    for n in range(1, outcomes + 1):
        for field in ("outcome_name", "effect_estimate", "ci_lower", "ci_upper"):
            path = f"outcomes.{n}.{field}"
            value = f"outcome {n}" if field == "outcome_name" else round(0.5 + n / 10_000, 4)
            fields[path] = {
                "module": "outcomes",
                "index": n,
                "field": field,
                "value": value,
                "quote": f"the quote of {path} with {value}",
                "page": 1 + n % 9,
                "source": "text",
                "start": n,
                "end": n + 20,
                "status": "verified",
                "flags": [],
            }
    item = batch_item_rows(ledger, batch)[0]["id"]
    assert states.claim(ledger, item, run_id="r", worker="w")
    assert states.complete(ledger, item, run_id="r", result={"fields": fields}, usage=Usage("m"))
    assert close_if_done(ledger, batch)
    return batch


def test_a_finished_batch_is_exporting_until_its_workbook_is_recorded(ledger: Ledger, tmp_path: Path) -> None:
    batch = _finished_batch(ledger)
    state = get_batch(ledger, batch)
    assert state is not None and state["status"] == "exporting" and state["completed_at"] is not None
    assert describe_state(state) == "exporting: every document is finished, the workbook is being written"
    written = write_batch_workbook(ledger, batch, tmp_path / "exports")
    assert (written.result, written.version) == (ExportResult.WRITTEN, 1)
    assert written.path == tmp_path / "exports" / f"batch-{batch}.xlsx"
    state = get_batch(ledger, batch)
    assert state is not None
    assert (state["status"], state["export_path"], describe_state(state)) == (
        "completed",
        str(written.path),
        "completed",
    )
    with pytest.raises(Exception, match="not waiting for its workbook"):
        write_batch_workbook(ledger, batch, tmp_path / "exports")  # a completed batch is not written again


def test_an_empty_batch_closes_at_once_and_completes_with_its_workbook(ledger: Ledger, tmp_path: Path) -> None:
    batch = create_batch(ledger, idempotency_key="empty", project="p", user="u", document_ids=[]).id
    assert _batch(ledger, batch)["status"] == "exporting"
    assert write_batch_workbook(ledger, batch, tmp_path).result is ExportResult.WRITTEN
    assert _batch(ledger, batch)["status"] == "completed"


def test_a_failed_write_is_recorded_in_words_and_the_batch_stays_exporting(ledger: Ledger, tmp_path: Path) -> None:
    batch = _finished_batch(ledger)
    exports = tmp_path / "exports"
    exports.write_text("a file where the folder should be")
    for attempt in (1, 2):
        with pytest.raises(ExportError) as failed:
            write_batch_workbook(ledger, batch, exports)
        assert failed.value.reason == f"file exists ({exports})"
        state = get_batch(ledger, batch)
        assert state is not None
        assert (state["status"], state["export_attempts"], state["export_path"]) == ("exporting", attempt, None)
        assert describe_state(state) == (
            f"export failed: file exists ({exports}) ({attempt} attempt{'s' if attempt > 1 else ''}; "
            "retried automatically, or `batch export`)"
        )
    exports.unlink()
    assert write_batch_workbook(ledger, batch, exports).result is ExportResult.WRITTEN
    state = get_batch(ledger, batch)
    assert state is not None and (state["status"], state["export_error"]) == ("completed", None)


def test_a_second_writer_of_the_same_version_is_told_it_was_already_written(ledger: Ledger, tmp_path: Path) -> None:
    batch = _finished_batch(ledger)
    first = write_batch_workbook(ledger, batch, tmp_path)
    with ledger.engine.begin() as conn:  # the second writer read the batch before the first recorded
        conn.execute(update(batches).where(batches.c.id == batch).values(status="exporting", export_path=None))
    assert record_export_failure(ledger, batch, "anything")  # only an exporting batch takes a failure
    with ledger.engine.begin() as conn:
        conn.execute(
            update(batches).where(batches.c.id == batch).values(status="completed", export_path=str(first.path))
        )
    assert not record_export_failure(ledger, batch, "late")  # a completed batch does not


def test_retry_reopens_an_exporting_batch_and_forgets_its_export_failure(ledger: Ledger, tmp_path: Path) -> None:
    [ok, bad] = add_documents(ledger, 2)
    batch = create_batch(ledger, idempotency_key="r", project="p", user="u", document_ids=[ok, bad]).id
    first, second = (row["id"] for row in batch_item_rows(ledger, batch))
    states.claim(ledger, first, run_id="r", worker="w")
    states.complete(ledger, first, run_id="r", result={"fields": {}}, usage=Usage("m"))
    states.claim(ledger, second, run_id="r", worker="w")
    states.fail(ledger, second, message="boom")
    assert close_if_done(ledger, batch)
    record_export_failure(ledger, batch, "no space left on device (/x)")
    assert retry_failed(ledger, batch, actor="ann").reopened
    state = get_batch(ledger, batch)
    assert state is not None
    assert (state["status"], state["export_error"], state["export_attempts"]) == ("open", None, 0)


def test_an_old_ledger_s_completed_batch_without_a_workbook_becomes_exporting(ledger: Ledger) -> None:
    batch = _finished_batch(ledger)
    with ledger.engine.begin() as conn:  # as the release before the exporting state left it
        conn.execute(update(batches).where(batches.c.id == batch).values(status="completed", export_path=None))
        conn.execute(update(ledger_meta).values(value="an older release"))
    ledger.create_schema()
    assert _batch(ledger, batch)["status"] == "exporting"


# --- killed writers -------------------------------------------------------------------------


def _cli(home: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "EXTRACTION_HOME": str(home)}
    env.pop("EXTRACTION_DATABASE_URL", None)
    return subprocess.Popen(
        [sys.executable, "-m", "extraction_pipeline.cli", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def _kill_mid_write(home: Path, folder: Path, *args: str) -> None:
    """Start the command and SIGKILL it while its partial file is being written."""
    proc = _cli(home, *args)
    deadline = time.monotonic() + 120
    while not any(p.name.endswith(".partial") and _size(p) > 0 for p in _entries(folder / PARTIAL_FOLDER)):
        assert proc.poll() is None, f"finished before it could be killed: {proc.communicate()}"
        assert time.monotonic() < deadline, "no partial file appeared"
        time.sleep(0.002)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:  # renamed into place meanwhile
        return 0


def _entries(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except FileNotFoundError:
        return []


@pytest.fixture
def big_batch(tmp_path: Path) -> Iterator[tuple[Path, Ledger, int]]:
    home = tmp_path / "home"
    home.mkdir()
    ledger = Ledger.connect(f"sqlite:///{home / 'ledger.db'}")
    # 4,000 values: a save that takes long enough (seconds) to be killed in the middle of.
    yield home, ledger, _finished_batch(ledger, outcomes=1000)
    ledger.dispose()


def test_a_workbook_write_killed_mid_save_leaves_the_previous_file_or_nothing(
    big_batch: tuple[Path, Ledger, int],
) -> None:
    home, ledger, batch = big_batch
    exports = home / "exports"
    # The batch's own workbook, killed: nothing where users pick it up, the batch still waiting for it.
    _kill_mid_write(home, exports, "batch", "export", str(batch))
    assert not (exports / f"batch-{batch}.xlsx").exists()
    assert [p.name for p in _entries(exports) if p.suffix == ".xlsx"] == []
    assert _batch(ledger, batch)["status"] == "exporting"
    # A copy over an existing file, killed: the previous file, byte for byte.
    copy = home / "copy.xlsx"
    done = _cli(home, "batch", "export", str(batch), "-o", str(copy))
    assert done.communicate(timeout=120) and done.returncode == 0
    before = copy.read_bytes()
    _kill_mid_write(home, home, "batch", "export", str(batch), "-o", str(copy))
    assert copy.read_bytes() == before
    # The next write sweeps what the killed ones left and completes the batch.
    finished = _cli(home, "batch", "export", str(batch))
    out, err = finished.communicate(timeout=120)
    assert finished.returncode == 0, err
    assert f"batch {batch} completed: workbook v1 written" in err.decode()
    assert out.decode().strip() == str(exports / f"batch-{batch}.xlsx")
    assert [p.name for p in _entries(exports)] == [f"batch-{batch}.xlsx"]
    assert openpyxl.load_workbook(exports / f"batch-{batch}.xlsx", read_only=True)["Values"].max_row > 4_000
    assert _batch(ledger, batch)["status"] == "completed"


def test_only_partial_files_of_gone_processes_on_this_host_are_swept(tmp_path: Path) -> None:
    target = tmp_path / "batch-1.xlsx"
    mine = partial_path(target)  # this process is alive: its partial file stays
    mine.parent.mkdir()
    mine.write_text("mine")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = mine.with_name(mine.name.replace(f".{os.getpid()}.", f".{gone.stdout.strip()}."))
    dead.write_text("dead")
    other_host = mine.with_name(f"batch-1.xlsx.another-machine.{gone.stdout.strip()}.0123456789ab.partial")
    other_host.write_text("elsewhere")
    assert remove_stale_partials(tmp_path) == [dead]
    assert mine.exists() and other_host.exists() and not dead.exists()


def test_two_writers_of_one_target_at_once_each_write_their_own_partial_file(tmp_path: Path) -> None:
    """Two downloads of the same reviewed workbook at once (two threads of one server): neither
    removes or renames the other's half-written file; the last to finish is what stays."""
    from extraction_pipeline.core.files import replacing

    target = tmp_path / "batch-1.xlsx"
    with replacing(target) as first:
        first.write_bytes(b"first, half")
        with replacing(target) as second:
            assert second != first
            second.write_bytes(b"second, whole")
        assert target.read_bytes() == b"second, whole" and first.read_bytes() == b"first, half"
        first.write_bytes(b"first, whole")
    assert target.read_bytes() == b"first, whole"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["batch-1.xlsx"]  # nothing of ours left


def test_many_writers_in_one_folder_never_trip_over_the_partial_folder(tmp_path: Path) -> None:
    """Each writer removes the partial folder when it leaves it empty while others create it
    again: 8 threads x 25 writes into one folder, every write lands whole."""
    from concurrent.futures import ThreadPoolExecutor

    from extraction_pipeline.core.files import replacing

    def write(n: int) -> None:
        with replacing(tmp_path / f"file-{n}.txt") as tmp:
            tmp.write_text(f"whole {n}")

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(write, range(200)))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"file-{n}.txt" for n in range(200))
    assert all((tmp_path / f"file-{n}.txt").read_text() == f"whole {n}" for n in range(200))


def test_an_empty_partial_folder_a_killed_writer_left_is_swept(tmp_path: Path) -> None:
    """Killed between making the folder and writing in it: the folder is left empty, and the next
    sweep removes it though it removes no file."""
    (tmp_path / PARTIAL_FOLDER).mkdir()
    assert remove_stale_partials(tmp_path) == []
    assert list(tmp_path.iterdir()) == []


def test_files_of_users_that_look_like_ours_are_never_swept(tmp_path: Path) -> None:
    """What a user keeps beside the workbooks, named like what a killed writer leaves, stays."""
    from extraction_pipeline.core.files import host_tag, owned_name

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = gone.stdout.strip()  # a process of this host that is gone
    look_alikes = [
        tmp_path / f"backup-{host_tag()}-{pid}-final",  # the folder the old rule would have removed
        tmp_path / f"upload-{host_tag()}-{pid}-x",
        tmp_path / f"report-{host_tag()}.{pid}.partial",
        tmp_path / f"batch-1.xlsx.{host_tag()}.{pid}.0123456789ab.partial",  # named as ours, not in our folder
        tmp_path / f".batch-1.xlsx.{host_tag()}.{pid}.partial",  # named as partial files once were
        tmp_path / f".notes.{host_tag()}.{pid}.txt",
    ]
    for path in look_alikes[:2]:
        path.mkdir()
        (path / "kept.txt").write_text("a user's")
    for path in look_alikes[2:]:
        path.write_text("a user's")
    ours = tmp_path / f"{owned_name('upload')}abc123".replace(f".{os.getpid()}.", f".{pid}.")
    ours.mkdir()
    partial = tmp_path / PARTIAL_FOLDER / f"batch-1.xlsx.{host_tag()}.{pid}.0123456789ab.partial"
    partial.parent.mkdir()
    partial.write_text("left by a killed writer")
    assert sorted(remove_stale_partials(tmp_path)) == sorted([ours, partial])
    assert all(path.exists() for path in look_alikes)


def test_a_run_warms_up_for_the_workbook_only_near_its_batchs_end() -> None:
    """It will close the batch (the active documents could all be its own), or it is a large
    run's last round (no more left than the pool holds); never a small run in a large batch."""
    assert worth_warming_up(active=3, left_in_run=3, pool=0)
    assert not worth_warming_up(active=4, left_in_run=3, pool=100)  # small: ends before it pays
    left = WARM_UP_MIN_LEFT
    assert worth_warming_up(active=100, left_in_run=left, pool=100)
    assert not worth_warming_up(active=101, left_in_run=left, pool=100)  # more than one round left
    assert not worth_warming_up(active=100, left_in_run=left - 1, pool=100)
