"""Fault drills through `extraction-pipeline daemon` on PostgreSQL, and the parse fuzz."""
