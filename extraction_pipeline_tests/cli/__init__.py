"""Tests of the command line, run as a user runs it (subprocesses)."""
