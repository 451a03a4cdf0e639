"""Evaluation: suites, experiments, scoring and enforcement hooks, outcome probes."""
