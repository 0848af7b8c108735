"""Tests of the pages and downloads over real HTTP."""
