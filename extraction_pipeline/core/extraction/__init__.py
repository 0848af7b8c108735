"""Extracting one document: the claim protocol, prompts, long papers in parts, double extraction
(consensus, adjudication) and the answer's assembly."""
