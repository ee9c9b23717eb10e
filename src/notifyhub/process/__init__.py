"""The hub as an operating-system process: uvicorn's server, the worker supervisor and the
garbage-collector policy (`notifyhub serve`)."""
