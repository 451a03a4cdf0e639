"""Recording: proxied messages to spans (redaction, truncation, span building) and OTLP ingest
of the agent's own spans."""
