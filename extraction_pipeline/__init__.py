"""Source-grounded extraction of structured data from randomized-trial PDFs, on Dagster."""

__version__ = "0.1.0"
