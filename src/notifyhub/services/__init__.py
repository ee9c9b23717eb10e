"""Use cases: ingest, inbox, groups, auth; the API, workers and CLI call these."""
