"""One transaction rule, checked on the source: services hold no SQL (query constructs
and statements live in `db/repositories/`) and open no transactions (they take the
caller's session or unit of work), but for the modules allowed below, each for a reason."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import notifyhub.services

SERVICES = Path(notifyhub.services.__file__).parent

Rule = Literal["sql", "transactions"]

QUERY_CONSTRUCTS = frozenset(
    {
        "select",
        "insert",
        "update",
        "delete",
        "text",
        "func",
        "literal",
        "literal_column",
        "column",
        "table",
        "and_",
        "or_",
        "not_",
        "case",
        "cast",
        "exists",
        "union",
        "union_all",
        "bindparam",
        "tuple_",
        "Select",
        "Insert",
        "Update",
        "Delete",
        "TextClause",
    }
)
SQL_TEXT = re.compile(r"\b(INSERT INTO|DELETE FROM|UPDATE \w+ SET|SELECT\s[\s\S]+?\sFROM)\b")
"""A string literal holding a statement (docstrings mentioning "an INSERT" pass)."""
TRANSACTION_MAKERS = frozenset({"async_sessionmaker", "create_sessionmaker", "autocommit"})
"""Names a module needs to open transactions of its own."""

# Modules still breaking a rule, and why. Whoever brings one under the rule removes it
# here (the last test fails while an entry is no longer needed), so the rule guards it.
ALLOWED: dict[tuple[str, Rule], str] = {
    # By contract, own transactions: a group commit before the 202, a buffered log.
    ("durable.py", "transactions"): "group commit and change-log flushes are batches",
    # The deliveries family, owned by the deliveries work this round: its services open
    # their own transactions (autocommit INSERT, claims) and deliveries.py schedules
    # after-commit sends with a `sqlalchemy.event` hook instead of db/unit.UnitOfWork.
    ("deliveries.py", "transactions"): "autocommit create; after-commit via sqlalchemy.event",
    ("sender.py", "transactions"): "outbox sender: worker batches",
    ("alerts.py", "transactions"): "alert sender: worker batches",
    # By contract, own transactions (documented in docs/ARCHITECTURE.md, Transactions):
    ("delayed.py", "transactions"): "TransitionLog: a flush is a batch of its own, retried whole",
    ("epoch.py", "transactions"): "EpochWatch: a worker loop step rebuilding Redis",
    ("snooze.py", "transactions"): "a snoozing PATCH (else Redis-only) commits its wake-up alone",
    ("actions.py", "transactions"): "an action's webhook (else Redis-only) commits alone",
    ("views.py", "transactions"): "Redis-only inbox reads look up views (cached) on their own",
    ("revocations.py", "transactions"): "after a Pub/Sub gap, a background read of revoked keys",
}


def _imports(tree: ast.AST) -> Iterator[tuple[str, str]]:
    """(module, name) of every import; (module, "") for a plain `import module`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            yield from ((node.module, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            yield from ((alias.name, "") for alias in node.names)


def _sql(tree: ast.AST) -> list[str]:
    found = []
    for module, name in _imports(tree):
        root = module.split(".")[0]
        if module.startswith("sqlalchemy.dialects") or (root == "sqlalchemy" and not name):
            found.append(module)
        elif root == "sqlalchemy" and name in QUERY_CONSTRUCTS:
            found.append(f"{module}.{name}")
    texts = (n.value for n in ast.walk(tree) if isinstance(n, ast.Constant))
    matches = (SQL_TEXT.search(text) for text in texts if isinstance(text, str))
    return found + [f"SQL text: {m.group(0)[:40]!r}" for m in matches if m]


def _transactions(tree: ast.AST) -> list[str]:
    return [
        f"{module}.{name}"
        for module, name in _imports(tree)
        if name in TRANSACTION_MAKERS or (module == "sqlalchemy" and name == "event")
    ]


CHECKS = {"sql": _sql, "transactions": _transactions}


def _violations(path: Path, rule: Rule) -> list[str]:
    return CHECKS[rule](ast.parse(path.read_text(), filename=str(path)))


def _modules() -> dict[str, Path]:
    return {path.name: path for path in sorted(SERVICES.rglob("*.py"))}


def _offenders(rule: Rule) -> dict[str, list[str]]:
    return {
        name: found
        for name, path in _modules().items()
        if (name, rule) not in ALLOWED and (found := _violations(path, rule))
    }


def test_no_service_holds_sql() -> None:
    assert _offenders("sql") == {}, "move it into db/repositories/ (they flush, never commit)"


def test_no_service_opens_its_own_transactions() -> None:
    assert _offenders("transactions") == {}, (
        "take the caller's AsyncSession, or its db/unit.UnitOfWork for after-commit work"
    )


def test_the_allow_list_names_only_modules_that_still_need_it() -> None:
    modules = _modules()
    stale = [
        key for key in ALLOWED if key[0] not in modules or not _violations(modules[key[0]], key[1])
    ]
    assert stale == [], f"remove {stale} from ALLOWED: the rule holds for them now"


def test_the_checks_see_what_they_look_for() -> None:
    tree = ast.parse(
        "from sqlalchemy import select\n"
        "from sqlalchemy.dialects.postgresql import insert\n"
        "from sqlalchemy.ext.asyncio import async_sessionmaker\n"
        "Q = 'SELECT id FROM t'\n"
        "'''One autocommitted INSERT: no BEGIN.'''\n"
    )
    assert _sql(tree) == [
        "sqlalchemy.select",
        "sqlalchemy.dialects.postgresql",
        "SQL text: 'SELECT id FROM'",
    ]
    assert _transactions(tree) == ["sqlalchemy.ext.asyncio.async_sessionmaker"]
