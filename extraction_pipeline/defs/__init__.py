"""Dagster wiring only, one role per module (the map: ARCHITECTURE.md, "Layers"). Business rules live in core."""
