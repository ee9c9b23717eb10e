"""PostgreSQL's "not now" errors are outages by SQLSTATE class; other errors are not."""

from __future__ import annotations

import asyncpg
import pytest
from sqlalchemy.exc import DBAPIError

from notifyhub.outages import outage_of


def _wrapped(error: Exception) -> DBAPIError:
    """As SQLAlchemy's asyncpg dialect raises it: a DBAPIError wrapping the driver's error."""
    try:
        raise RuntimeError(str(error)) from error
    except RuntimeError as adapted:
        return DBAPIError("SELECT 1", None, adapted)


@pytest.mark.parametrize(
    "sqlstate",
    ["08006", "08001", "53300", "53100", "57P01", "57P02", "57P03", "57014", "40001", "40P01"],
)
def test_a_postgres_error_that_means_not_now_is_an_outage(sqlstate: str) -> None:
    error_class = asyncpg.PostgresError.get_message_class_for_sqlstate(sqlstate)
    error = error_class(f"sqlstate {sqlstate}")
    assert outage_of(error) == "postgres"
    assert outage_of(_wrapped(error)) == "postgres"


@pytest.mark.parametrize("sqlstate", ["23505", "42601", "22P02", "55000", "42P01"])
def test_a_postgres_error_about_the_request_or_our_sql_is_not(sqlstate: str) -> None:
    error_class = asyncpg.PostgresError.get_message_class_for_sqlstate(sqlstate)
    error = error_class(f"sqlstate {sqlstate}")
    assert outage_of(error) is None
    assert outage_of(_wrapped(error)) is None
