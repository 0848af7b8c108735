"""Table definitions (SQLAlchemy Core). Timestamps are naive UTC on both SQLite and PostgreSQL."""

from __future__ import annotations

from enum import StrEnum

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)


class ItemStatus(StrEnum):
    PENDING = "pending"
    EXTRACTING = "extracting"
    COMPLETED = "completed"
    ERROR = "error"


ACTIVE_ITEM_STATUSES = (ItemStatus.PENDING.value, ItemStatus.EXTRACTING.value)


class BatchStatus(StrEnum):
    """open: documents still to finish. exporting: every document is finished and the workbook is
    being written (or its writing failed and is retried: ``export_error`` says why). completed:
    the workbook is written; a batch is never completed without one."""

    OPEN = "open"
    EXPORTING = "exporting"
    COMPLETED = "completed"


class BatchOrigin(StrEnum):
    """Who executes a batch's items: our dispatcher sensor, or the runs of a UI backfill/run."""

    DISPATCH = "dispatch"
    BACKFILL = "backfill"
    RUN = "run"


class ProviderBatchPhase(StrEnum):
    """Where a batch asked through a provider's batch API stands: its prompts are being prepared
    (parsed, built, uploaded), the provider has them, or that is over (answered, failed, expired or
    cancelled: whatever it did not answer is then asked by ordinary calls)."""

    PREPARING = "preparing"
    SUBMITTED = "submitted"
    ENDED = "ended"


metadata = MetaData()

documents = Table(
    "documents",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("project", String(200), nullable=False),
    Column("filename", String(500), nullable=False),
    Column("sha256", String(64), nullable=False),
    Column("size_bytes", BigInteger, nullable=False),
    Column("pages", Integer, nullable=False),
    Column("stored_path", Text, nullable=False),
    Column("created_at", DateTime, nullable=False),
    # The Dagster partition key, readable in the launch dialog ("doc-12-smith-2020-nejm"); NULL in
    # ledgers older than readable keys, whose documents keep their "doc-12" partitions.
    Column("partition_key", String(120), nullable=True),
    # What the paper is, read from the PDF at registration (core/pdf/bibliography.py): for lists;
    # NULL where the PDF does not say, and in ledgers older than these columns.
    Column("title", Text, nullable=True),
    Column("first_author", String(200), nullable=True),
    Column("year", Integer, nullable=True),
    UniqueConstraint("project", "sha256", name="uq_documents_project_sha256"),
)

templates = Table(
    "templates",
    metadata,
    # Immutable versions of a project's template: editing inserts a new version, and a batch
    # points at the exact version it started with, so results never change under it.
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("project", String(200), nullable=False),
    Column("version", Integer, nullable=False),
    Column("base", String(50), nullable=False),
    Column("digest", String(64), nullable=False),
    Column("definition_json", Text, nullable=False),
    Column("created_at", DateTime, nullable=False),
    UniqueConstraint("project", "version", name="uq_templates_project_version"),
)

batches = Table(
    "batches",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("idempotency_key", String(200), nullable=False, unique=True),
    # Globally unique: Dagster run keys and run tags use it, so a new ledger on an old Dagster
    # instance (ids restarting at 1) never matches the old ledger's runs.
    Column("uid", String(32), nullable=False, unique=True),
    Column("project", String(200), nullable=False),
    Column("user", String(200), nullable=False),
    Column("origin", String(20), nullable=False),
    # What launched it: the backfill id (origin "backfill") or the run id (origin "run").
    Column("origin_ref", String(100), nullable=True),
    Column("status", String(20), nullable=False),
    Column("total_items", Integer, nullable=False),
    Column("created_at", DateTime, nullable=False),
    Column("completed_at", DateTime, nullable=True),
    Column("export_path", Text, nullable=True),
    # The template version frozen at creation (NULL only in ledgers older than templates).
    Column("template_id", Integer, ForeignKey("templates.id"), nullable=True),
    # How many workbooks were written: a batch reopened by `batch retry` gets a new version
    # (batch-7-v2.xlsx) and the earlier workbook is kept.
    Column("export_version", Integer, nullable=False, default=0),
    # Why the last attempt to write the workbook failed ("no space left on device: ..."), how many
    # attempts failed and when the last did; cleared when a workbook is recorded.
    Column("export_error", Text, nullable=True),
    Column("export_attempts", Integer, nullable=False, default=0),
    Column("export_failed_at", DateTime, nullable=True),
    # 1: ask the model again even where an answer for the same prompt was already paid for.
    Column("fresh", Integer, nullable=False, default=0),
    # Double extraction: a second model extracts every document independently (same prompt,
    # neither sees the other's answer); disagreements go to the top of the review queue.
    Column("second_model", String(200), nullable=True),
    # Optional third model: it suggests which extraction is right where the two disagree.
    Column("adjudicator_model", String(200), nullable=True),
    # 1: outcomes the recall check lists as possibly missed are asked for in one follow-up call.
    Column("follow_up", Integer, nullable=False, default=0),
    # Asked through the provider's batch API (half price, answers within hours): None for
    # ordinary calls, else a ProviderBatchPhase's value. Its items are dispatched once it is "ended".
    Column("provider_batch", String(20), nullable=True),
)

batch_items = Table(
    "batch_items",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("batch_id", Integer, ForeignKey("batches.id"), nullable=False),
    Column("document_id", Integer, ForeignKey("documents.id"), nullable=False),
    Column("status", String(20), nullable=False),
    Column("attempts", Integer, nullable=False, default=0),
    Column("dispatched_at", DateTime, nullable=True),
    # Who marked it dispatched: "dispatcher" (the sensor, which finds its own lost marks through
    # its cursor) or "run" (a run launched from the UI took it itself).
    Column("dispatched_by", String(20), nullable=True),
    Column("run_id", String(64), nullable=True),
    Column("worker", String(200), nullable=True),
    Column("message", Text, nullable=True),
    Column("created_at", DateTime, nullable=False),
    Column("started_at", DateTime, nullable=True),
    Column("finished_at", DateTime, nullable=True),
    Column("updated_at", DateTime, nullable=False),
    Column("model", String(200), nullable=True),
    Column("tokens_in", Integer, nullable=False, default=0),
    Column("tokens_out", Integer, nullable=False, default=0),
    Column("cost_usd", Float, nullable=False, default=0.0),
    # Prompt tokens the provider served from its cache, and what caching and batch prices saved
    # against ordinary calls (tokens_in counts the cached ones too; negative: cache writes that
    # were not read back); the prompt tokens written to the cache (Anthropic bills them at 1.25x).
    Column("cached_tokens", Integer, nullable=False, default=0),
    Column("saved_usd", Float, nullable=False, default=0.0),
    Column("cache_written_tokens", Integer, nullable=False, default=0),
    # Calls abandoned after the timeout (the provider may have billed them): see Usage.abandoned_calls.
    Column("abandoned_calls", Integer, nullable=False, default=0),
    Column("result_json", Text, nullable=True),
    # 0 for the run that first launched the item; +1 each time it is dispatched again (its runs
    # died, or `batch retry`). Part of the dispatcher's run key, so each round gets a new run.
    Column("dispatch_round", Integer, nullable=False, default=0),
    # The round `batch retry` (or a UI re-execution) started; the limit on rounds for runs that
    # keep dying counts from here, so a user's retries never use it up.
    Column("retry_round", Integer, nullable=False, default=0),
    # When the current streak of transient failures began (None: not failing). The retry budget
    # is measured from here, across step retries and re-dispatched runs alike.
    Column("failing_since", DateTime, nullable=True),
    UniqueConstraint("batch_id", "document_id", name="uq_items_batch_document"),
)
Index("ix_items_batch_status", batch_items.c.batch_id, batch_items.c.status)
Index("ix_items_status_updated", batch_items.c.status, batch_items.c.updated_at)
# The dispatcher's question each tick: pending items not yet dispatched (and lost dispatches).
Index("ix_items_status_dispatched", batch_items.c.status, batch_items.c.dispatched_at)

item_history = Table(
    "item_history",
    metadata,
    # Append-only: every time an item is put back to work (a dead run's document dispatched
    # again, an errored document retried by a user), what it was before and who decided.
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("item_id", Integer, ForeignKey("batch_items.id"), nullable=False),
    Column("batch_id", Integer, ForeignKey("batches.id"), nullable=False),
    Column("event", String(40), nullable=False),
    Column("from_status", String(20), nullable=False),
    Column("to_status", String(20), nullable=False),
    Column("run_id", String(64), nullable=True),
    Column("attempts", Integer, nullable=False),
    Column("message", Text, nullable=True),
    Column("actor", String(200), nullable=False),
    Column("created_at", DateTime, nullable=False),
)
Index("ix_item_history_item", item_history.c.item_id)

provider_breakers = Table(
    "provider_breakers",
    metadata,
    # One circuit breaker per model string: consecutive transient failures open it, so new
    # dispatches pause while the provider is failing instead of burning every document's budget.
    Column("model", String(200), primary_key=True),
    Column("failures", Integer, nullable=False),
    Column("failing_since", DateTime, nullable=True),
    Column("open_until", DateTime, nullable=True),
    Column("last_error", Text, nullable=True),
    Column("updated_at", DateTime, nullable=False),
)

provider_budgets = Table(
    "provider_budgets",
    metadata,
    # One token and request budget per model string for the whole instance (every run, every
    # worker on any host): a call is sent when it fits. The limits are the user's (configured) and
    # the provider's (learned from its rate-limit headers); the lower one applies. The budget
    # itself is a generic cell rate: ``*_ready_at`` is when everything reserved so far will have
    # been paid back (epoch seconds); a call may go when that is at most a minute ahead.
    Column("model", String(200), primary_key=True),
    Column("configured_tokens_per_minute", Integer, nullable=True),
    Column("configured_requests_per_minute", Integer, nullable=True),
    Column("learned_tokens_per_minute", Integer, nullable=True),
    Column("learned_requests_per_minute", Integer, nullable=True),
    Column("tokens_ready_at", Float, nullable=False),
    Column("requests_ready_at", Float, nullable=False),
    Column("paused_until", Float, nullable=False, default=0.0),  # a refusal's Retry-After (epoch seconds)
    Column("updated_at", DateTime, nullable=False),
    # Until the provider has answered once, its limits are unknown: one call at a time goes first
    # and tells them (``probe_until``: when that call's claim lapses; ``answers_seen``: answers
    # and refusals that carried word from the provider).
    Column("probe_until", Float, nullable=False, default=0.0),
    Column("answers_seen", Integer, nullable=False, default=0),
    # When the provider last said its limits (epoch seconds): older than LEARNED_FRESH_SECONDS,
    # what it said is no longer trusted and the next call probes again.
    Column("heard_at", Float, nullable=False, default=0.0),
    # A provider that meters output tokens apart (Anthropic, from each call's max_tokens when it
    # starts): that limit, learned, and its own cell rate; input tokens then use the columns above.
    Column("learned_output_tokens_per_minute", Integer, nullable=True),
    Column("output_ready_at", Float, nullable=False, default=0.0),
)

parsed_documents = Table(
    "parsed_documents",
    metadata,
    # Content-addressed: the same bytes parsed by the same parser version are parsed once.
    Column("sha256", String(64), primary_key=True),
    Column("parser_version", String(100), primary_key=True),
    Column("engine", String(100), nullable=False),
    Column("engine_version", String(100), nullable=False),
    Column("pages", Integer, nullable=False),
    Column("seconds", Float, nullable=False),
    Column("pages_json", Text, nullable=False),
    Column("tables_json", Text, nullable=False),
    Column("layout_json", Text, nullable=True),  # line boxes per page (added with parser version 3)
    # A permanent parse failure is cached too: the same bytes are never parsed again by the same
    # parser version. For timeouts, ``timeout_seconds`` records the limit that was exceeded, so
    # raising the limit allows a new attempt.
    Column("error", Text, nullable=True),
    Column("timeout_seconds", Float, nullable=True),
    Column("created_at", DateTime, nullable=False),
)

document_contents = Table(
    "document_contents",
    metadata,
    # The PDF's bytes, content-addressed, in a shared (PostgreSQL) ledger only: a step on another
    # machine (a Celery worker with its own EXTRACTION_HOME) parses from here. A SQLite ledger
    # lives on one machine with its document store, so it keeps the bytes there only.
    Column("sha256", String(64), primary_key=True),
    Column("size_bytes", BigInteger, nullable=False),
    Column("content", LargeBinary, nullable=False),
    Column("created_at", DateTime, nullable=False),
)

prompt_audit = Table(
    "prompt_audit",
    metadata,
    # Every prompt sent for an item, verbatim (messages as JSON), for audit. Holds no secret:
    # API keys travel in request headers, never in messages.
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("item_id", Integer, ForeignKey("batch_items.id"), nullable=False),
    Column("run_id", String(64), nullable=False),
    Column("model", String(200), nullable=False),
    Column("messages_json", Text, nullable=False),
    Column("created_at", DateTime, nullable=False),
)
Index("ix_prompt_audit_item", prompt_audit.c.item_id)

review_decisions = Table(
    "review_decisions",
    metadata,
    # Append-only audit of what reviewers decided about each extracted value (never updated or
    # deleted). A value is addressed by (item, path); ``seq`` numbers its decisions 1, 2, ... and
    # is unique, so two reviewers deciding from the same state cannot both win: the second insert
    # fails and is reported as a conflict. Comments carry no ``seq`` (they decide nothing).
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("batch_id", Integer, ForeignKey("batches.id"), nullable=False),
    Column("item_id", Integer, ForeignKey("batch_items.id"), nullable=False),
    Column("path", String(300), nullable=False),
    Column("seq", Integer, nullable=True),
    Column("action", String(20), nullable=False),
    Column("machine_value_json", Text, nullable=True),
    Column("value_json", Text, nullable=True),
    Column("quote", Text, nullable=True),
    Column("grounding_json", Text, nullable=True),
    Column("comment", Text, nullable=True),
    Column("reviewer", String(200), nullable=False),
    Column("origin", String(300), nullable=False),
    Column("created_at", DateTime, nullable=False),
    UniqueConstraint("item_id", "path", "seq", name="uq_review_decisions_value_seq"),
)
Index("ix_review_decisions_batch", review_decisions.c.batch_id)

model_answers = Table(
    "model_answers",
    metadata,
    # Paid once: the model's accepted answer per (model, exact prompt). The prompt embeds the
    # document's parsed text, the frozen template's schema and rules and the prompt version, so the
    # same key means the same question; a later batch reuses the answer (no call, no cost) and
    # grounds it again with the current code. A batch created with --fresh asks again and
    # replaces the stored answer.
    Column("key", String(64), primary_key=True),
    Column("model", String(200), nullable=False),
    Column("content", Text, nullable=False),
    Column("tokens_in", Integer, nullable=False),
    Column("tokens_out", Integer, nullable=False),
    Column("cost_usd", Float, nullable=False),
    Column("cached_tokens", Integer, nullable=False, default=0),
    Column("saved_usd", Float, nullable=False, default=0.0),
    Column("cache_written_tokens", Integer, nullable=False, default=0),
    Column("item_id", Integer, nullable=False),  # the item whose call paid for it
    Column("created_at", DateTime, nullable=False),
)

provider_batches = Table(
    "provider_batches",
    metadata,
    # One batch submitted to a provider's batch API: its id there is kept here the moment the
    # provider gives it, so a restarted daemon follows it where it left off.
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("batch_id", Integer, ForeignKey("batches.id"), nullable=False),
    Column("model", String(200), nullable=False),
    Column("provider_batch_id", String(200), nullable=False),
    Column("input_file_id", String(200), nullable=True),
    Column("status", String(20), nullable=False),  # the provider's: validating ... completed, expired
    Column("requests", Integer, nullable=False),
    Column("answered", Integer, nullable=False, default=0),
    Column("fallen_back", Integer, nullable=False, default=0),
    Column("message", Text, nullable=True),
    Column("submitted_at", DateTime, nullable=False),
    Column("polled_at", DateTime, nullable=True),
    Column("ended_at", DateTime, nullable=True),
    # The key the submission was tagged with at the provider, noted before the provider was asked:
    # a retry that finds the row still without the provider's id looks for the key there first.
    Column("submission_key", String(120), nullable=True),
)
Index("ix_provider_batches_batch", provider_batches.c.batch_id)

provider_batch_entries = Table(
    "provider_batch_entries",
    metadata,
    # One prompt of a provider batch: the document's item and the key its answer is stored under
    # (model_answers), so the document's run finds it as an answer already paid for.
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("provider_batch", Integer, ForeignKey("provider_batches.id"), nullable=False),
    Column("item_id", Integer, ForeignKey("batch_items.id"), nullable=False),
    Column("custom_id", String(100), nullable=False),
    Column("answer_key", String(64), nullable=False),
    Column("state", String(20), nullable=False),  # submitted, answered, fallen_back
    Column("reason", Text, nullable=True),
    UniqueConstraint("provider_batch", "custom_id", name="uq_provider_batch_entries_custom_id"),
)

# What this ledger was last brought up to: key "schema" holds the fingerprint of the tables,
# columns and indexes a release expects (see database.Ledger.create_schema).
ledger_meta = Table(
    "ledger_meta",
    metadata,
    Column("key", String(40), primary_key=True),
    Column("value", Text, nullable=False),
)

users = Table(
    "users",
    metadata,
    # Who signs in (core/ledger/users.py): decisions, uploads and launches are recorded under the
    # signed-in user's name, never a typed one. Only the sha256 of the personal token is kept, so a
    # copy of the ledger signs nobody in; a disabled user keeps the row (their name stays in history).
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(100), nullable=False, unique=True),
    Column("role", String(20), nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("created_at", DateTime, nullable=False),
    Column("disabled_at", DateTime, nullable=True),
)

user_sessions = Table(
    "user_sessions",
    metadata,
    # A browser's sign-in: the id is the sha256 of the cookie's secret (the secret itself is never
    # stored, so reading the ledger lends no one a session).
    Column("id", String(64), primary_key=True),
    Column("user_id", Integer, ForeignKey("users.id"), nullable=False),
    Column("created_at", DateTime, nullable=False),
    Column("expires_at", DateTime, nullable=False),
)
Index("ix_user_sessions_user", user_sessions.c.user_id)

signin_codes = Table(
    "signin_codes",
    metadata,
    # A sign-in link's code: good once, for minutes (the link never carries the personal token).
    # The id is the sha256 of the code; the code itself is never stored.
    Column("id", String(64), primary_key=True),
    Column("user_id", Integer, ForeignKey("users.id"), nullable=False),
    Column("created_at", DateTime, nullable=False),
    Column("expires_at", DateTime, nullable=False),
    Column("used_at", DateTime, nullable=True),
)

outcome_labels = Table(
    "outcome_labels",
    metadata,
    # A reviewer's grouping of a batch's outcomes for its forest plots (core/synthesis/batch.py):
    # outcomes whose normalized names carry one label are pooled as one. Appended, never updated;
    # the latest row per (batch, name) holds, and an empty label gives the outcome back its own name.
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("batch_id", Integer, ForeignKey("batches.id"), nullable=False),
    Column("name_key", String(500), nullable=False),
    Column("label", String(500), nullable=False),
    Column("reviewer", String(100), nullable=False),
    Column("decided_at", DateTime, nullable=False),
)
Index("ix_outcome_labels_batch", outcome_labels.c.batch_id, outcome_labels.c.name_key)

arm_sides = Table(
    "arm_sides",
    metadata,
    # The analyst's comparisons of a batch (core/ledger/arm_sides.py): per comparison, the side of a
    # study's arm (intervention / comparator / none); an arm without a row keeps the side proposed
    # from its name. A row without a document declares the comparison itself (side "defined").
    # Appended, never updated; the latest row per (batch, comparison, document, arm) holds.
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("batch_id", Integer, ForeignKey("batches.id"), nullable=False),
    Column("comparison", String(200), nullable=False),
    Column("document_id", Integer, nullable=True),
    Column("arm", String(100), nullable=False),
    Column("arm_name", String(500), nullable=False),
    Column("side", String(20), nullable=False),
    Column("reviewer", String(100), nullable=False),
    Column("decided_at", DateTime, nullable=False),
)
Index("ix_arm_sides_batch", arm_sides.c.batch_id, arm_sides.c.comparison)

missed_reviews = Table(
    "missed_reviews",
    metadata,
    # What a reviewer did with an item of a document's "possibly missed" list (core/review/missed.py):
    # dismissed it, or turned it into a value (``path``: the value corrected with it). Appended,
    # never updated; the latest row per (item, key) holds.
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("item_id", Integer, ForeignKey("batch_items.id"), nullable=False),
    Column("key", String(200), nullable=False),
    Column("action", String(20), nullable=False),
    Column("path", String(300), nullable=True),
    Column("reviewer", String(100), nullable=False),
    Column("decided_at", DateTime, nullable=False),
)
Index("ix_missed_reviews_item", missed_reviews.c.item_id, missed_reviews.c.key)
