"""Checking what the model said against the paper: grounding of quotes and numbers, plausibility checks."""
