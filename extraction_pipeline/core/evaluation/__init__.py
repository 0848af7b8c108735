"""Measuring a batch against gold values: reading gold tables, matching outcomes, scoring fields."""
