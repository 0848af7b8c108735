"""Reviewing extracted values: decisions (append-only), the values they apply to, page images."""
