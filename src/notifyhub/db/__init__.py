"""PostgreSQL: SQLAlchemy models, the async engine, and repositories that flush, never commit."""
