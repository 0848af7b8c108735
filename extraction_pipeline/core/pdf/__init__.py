"""PDF to page-anchored text and tables: the engine (runs in a child process), the isolation
that runs it with a hard timeout, and the document model with its character map."""
