"""Runs: the in-memory registry the proxy resolves runs from, creating and finishing runs
(root span, hooks), and per-run sandboxes."""
