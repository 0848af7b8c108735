"""Which ledger database errors are an outage (retry later) and which are bugs (do not).

Transient is a property of the cause, not of the layer where it surfaced: a
PostgreSQL restart drops every pooled connection, and whichever step, sensor or export touches the
ledger next sees ``OperationalError: server closed the connection unexpectedly``. Those wait and
retry. A missing table, a constraint violation or bad SQL would fail the same way forever: they are
not retried.
"""

from __future__ import annotations

import re

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

# Phrases PostgreSQL (psycopg2) and SQLite use for a connection or server that is (briefly) unusable.
_OUTAGE = re.compile(
    r"server closed the connection|connection (?:refused|reset|timed out|is closed|already closed|not open)"
    r"|could not connect|terminating connection|connection to server .* failed|no connection to the server"
    r"|the database system is (?:starting up|shutting down|in recovery|not yet accepting)"
    r"|ssl syscall|broken pipe|database is locked|too many clients|timeout expired|cannot connect now"
    r"|could not receive data|could not send data|lost synchronization|admin shutdown",
    re.IGNORECASE,
)


def is_database_outage(exc: BaseException) -> bool:
    """True when ``exc`` says the ledger database was unreachable or dropped the connection."""
    if not isinstance(exc, DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    if isinstance(exc, (OperationalError, InterfaceError)):
        return bool(_OUTAGE.search(str(exc.orig) if exc.orig is not None else str(exc)))
    return False


def describe_database_outage(exc: BaseException) -> str:
    """One line for the item's message and the run log: the driver's own words, no SQL, no URL."""
    orig = getattr(exc, "orig", None) or exc
    first = next((line.strip() for line in str(orig).splitlines() if line.strip()), type(orig).__name__)
    return f"ledger database connection lost: {first[:200]}"
