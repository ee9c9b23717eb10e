"""HTTP edge: FastAPI app, dependencies, problem+json mapping, routers."""
