"""Dagster wiring only: partitions, resources, assets, jobs, sensors. Business rules live in core."""
