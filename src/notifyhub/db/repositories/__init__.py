"""Repositories: add and flush, never commit (the caller owns the transaction)."""
