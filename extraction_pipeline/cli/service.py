"""Commands on the instance: init, the demo, the Dagster UI and daemon."""

from __future__ import annotations

import argparse
import contextlib
import signal
import time

from extraction_pipeline.cli.common import (
    EXIT_FAILURE,
    AddCommand,
    positive_int,
    print_json,
)
from extraction_pipeline.core.settings import DEFAULT_LLM_SLOTS, DEFAULT_PARSE_SLOTS, Settings


def cmd_init(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.instance import init_home

    report = init_home(settings, {"pdf_parse": args.parse_slots, "llm": args.llm_slots})
    print(f"home       {report.home}")
    print(f"dagster    {report.home / 'dagster' / 'dagster.yaml'} ({report.dagster_yaml}, {report.storage} storage)")
    print(f"ledger     {report.ledger_url}")
    print("pools      " + ", ".join(f"{name}={limit}" for name, limit in report.pools.items()))
    stored, elsewhere = report.contents
    if stored or elsewhere:
        print(f"documents  {stored} PDF(s) copied into the ledger for workers on other machines", end="")
        print(f"; {elsewhere} not on this machine: run `init` where they were added" if elsewhere else "")
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _stop_on_signals() -> None:
    for stop in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop, _interrupt)


def _run_in_foreground(settings: Settings, *, with_ui: bool, port: int = 3000) -> int:
    from extraction_pipeline.instance import DaemonProcess, require_initialized

    require_initialized(settings)
    # SIGTERM (a service manager, `kill`) stops it like Ctrl-C: Dagster runs in its own session,
    # so it is stopped only if this process gets to its cleanup. SIGINT is set too: a shell
    # without job control starts background commands with SIGINT ignored.
    _stop_on_signals()
    daemon = DaemonProcess(settings, with_ui=with_ui, port=port).start()
    assert daemon.process is not None  # started just above
    what = f"Dagster UI on http://127.0.0.1:{port}" if with_ui else "dagster-daemon running"
    print(f"{what} (pid {daemon.process.pid}, log: {daemon.log_path}); Ctrl-C stops it", flush=True)
    try:
        while daemon.alive():
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    # A second Ctrl-C / SIGTERM during the drain cuts it short (DaemonProcess.drain catches it).
    daemon.drain(settings.drain_seconds, say=lambda text: print(text, flush=True))
    print("stopped", flush=True)
    return 0


def cmd_ui(args: argparse.Namespace, settings: Settings) -> int:
    """The Dagster UI and the project's pages on one port, plus the daemon beside it."""
    import os

    from extraction_pipeline.core.pdf.uploads import sweep_stale_uploads
    from extraction_pipeline.instance import DaemonProcess, dagster_env, init_home, is_initialized
    from extraction_pipeline.web.guard import served_host
    from extraction_pipeline.web.server import check_binding, serve

    check_binding(args.host, settings.ui_token)
    if not is_initialized(settings):  # a first start: the home is set up as `init` would (default pools)
        report = init_home(settings)
        pools = ", ".join(f"{name}={limit}" for name, limit in report.pools.items())
        print(f"initialized {report.home} (first start; pools {pools}; `init` changes them)", flush=True)
    from extraction_pipeline.cli.common import open_ledger
    from extraction_pipeline.core.ledger.users import list_users

    if not list_users(open_ledger(settings)):
        print(
            "no users yet: uploads, batches and review decisions need a signed-in user; "
            "`extraction-pipeline users add NAME --role admin` prints your sign-in link",
            flush=True,
        )
    swept = sweep_stale_uploads(settings.home_dir, settings.documents_dir)
    if swept:
        print(f"removed {len(swept)} unfinished upload(s) left by a server that was stopped mid-upload", flush=True)
    os.environ.update({k: v for k, v in dagster_env(settings).items() if k in ("DAGSTER_HOME", "EXTRACTION_HOME")})
    _stop_on_signals()
    daemon = DaemonProcess(settings).start()
    assert daemon.process is not None  # started just above
    url = f"http://{served_host(args.host)}:{args.port}"
    settings.record_ui_url(url)  # the address `users add` prints sign-in links for
    print(
        f"Dagster UI on {url}, batches and downloads on {url}/extraction (daemon pid {daemon.process.pid}, "
        f"log: {daemon.log_path}); Ctrl-C stops both",
        flush=True,
    )
    with contextlib.suppress(KeyboardInterrupt):
        serve(settings, host=args.host, port=args.port, token=settings.ui_token)
    daemon.drain(settings.drain_seconds, say=lambda text: print(text, flush=True))
    print("stopped", flush=True)
    return 0


def cmd_daemon(args: argparse.Namespace, settings: Settings) -> int:
    return _run_in_foreground(settings, with_ui=False)


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.demo import run_demo

    summary = run_demo(settings, documents=args.documents, timeout_seconds=args.timeout)
    if args.json:
        print_json(summary)
    return 0 if summary["batch_status"] == "completed" else EXIT_FAILURE


def register(add: AddCommand) -> None:
    init = add(
        "init", cmd_init, "Create or complete the instance home: ledger schema, dagster.yaml, pool limits (idempotent)."
    )
    init.add_argument(
        "--parse-slots",
        type=positive_int,
        default=DEFAULT_PARSE_SLOTS,
        help=f"pdf_parse pool limit (default {DEFAULT_PARSE_SLOTS})",
    )
    init.add_argument(
        "--llm-slots",
        type=positive_int,
        default=DEFAULT_LLM_SLOTS,
        help=f"llm pool limit (default {DEFAULT_LLM_SLOTS})",
    )

    demo = add(
        "demo",
        cmd_demo,
        "Generate synthetic trial PDFs, run them as a batch through the Dagster daemon, write the workbook.",
    )
    demo.add_argument("--documents", type=positive_int, default=5, help="number of synthetic PDFs (default 5)")
    demo.add_argument("--timeout", type=positive_int, default=600, help="seconds to wait for the batch (default 600)")
    demo.add_argument("--json", action="store_true", help="also print the summary as JSON")

    ui = add(
        "ui",
        cmd_ui,
        "Serve the Dagster UI and the batches/download pages on one port, with the daemon. Beyond loopback "
        "it needs EXTRACTION_UI_TOKEN.",
    )
    ui.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    ui.add_argument("--port", type=positive_int, default=3000)
    add("daemon", cmd_daemon, "Run the Dagster daemon (sensors, run queue, monitoring) without the UI.")
