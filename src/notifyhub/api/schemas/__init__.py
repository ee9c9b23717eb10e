"""Request and response bodies of the HTTP API: a module per resource, shared types in `common`."""
