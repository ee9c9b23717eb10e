"""One transaction rule, checked on the source: services hold no SQL (query constructs
and statements live in `db/repositories/`) and open no transactions (they take the
caller's session or unit of work). A service that owns its transactions by contract is
given a `Units` factory by the composition and is listed below with that contract."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import notifyhub.services

SERVICES = Path(notifyhub.services.__file__).parent

Rule = Literal["sql", "transactions", "units"]

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
SESSION_MAKERS = frozenset({"async_sessionmaker", "create_sessionmaker"})
TRANSACTION_MAKERS = SESSION_MAKERS | {"UnitOfWork"}
"""What a module imports or calls to open transactions of its own making (importing
`UnitOfWork` to name the caller's unit's type is fine)."""
UNIT_FACTORY = "Units"
"""What a service owning its transactions by contract is given instead."""

# Services that own their transactions (through an injected `Units`), each by contract
# (its class docstring says so). One whose work could join its caller's unit leaves the
# list (the last test fails while an entry is no longer needed), so the rule guards it.
ALLOWED: dict[tuple[str, Rule], str] = {
    ("durable.py", "units"): "a group commit answers many requests; change-log flushes batch",
    ("delayed.py", "units"): "TransitionLog: a flush is a batch of its own, retried whole",
    ("sender.py", "units"): "outbox sender: the send falls between its claim and settlement",
    ("alerts.py", "units"): "alert sender: the send falls between its claim and mark",
    ("epoch.py", "units"): "EpochWatch: a worker loop step rebuilding Redis, no caller",
    ("snooze.py", "units"): "a snoozing PATCH (else Redis-only) commits its wake-up alone",
    ("actions.py", "units"): "an action's webhook commits before the answer, a 409 included",
    ("views.py", "units"): "Redis-only inbox reads look views up (cached) on their own",
    ("revocations.py", "units"): "after a Pub/Sub gap, a background read of revoked keys",
    ("vapid.py", "units"): "VapidKeys: the installation's pair, read or made once per process",
    ("webpush_target.py", "units"): "a push attempt reads its subscription, claim to settle",
    ("quiet_hours.py", "units"): "StreamQuiet: streamed users' schedules, a background read",
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


def _calls(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """(name, number of arguments) of each call: `f` for `f(...)` and `x.f(...)`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func, count = node.func, len(node.args) + len(node.keywords)
            if isinstance(func, ast.Name):
                yield func.id, count
            elif isinstance(func, ast.Attribute):
                yield func.attr, count


def _transactions(tree: ast.AST) -> list[str]:
    imported = [
        f"{module}.{name}"
        for module, name in _imports(tree)
        if name in SESSION_MAKERS or (module == "sqlalchemy" and name == "event")
    ]
    calls = list(_calls(tree))
    opened = [f"{name}(...)" for name, _ in calls if name in TRANSACTION_MAKERS]
    begun = [".begin()" for name, count in calls if name == "begin" and not count]
    return imported + opened + begun


def _units(tree: ast.AST) -> list[str]:
    return [f"{module}.{name}" for module, name in _imports(tree) if name == UNIT_FACTORY]


CHECKS = {"sql": _sql, "transactions": _transactions, "units": _units}


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


def test_only_services_owning_transactions_by_contract_are_given_units() -> None:
    assert _offenders("units") == {}, (
        "take the caller's unit; or, where the service owns its transactions by contract"
        " (say so in its docstring), list it in ALLOWED with that contract"
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
        "from notifyhub.db.unit import Units\n"
        "Q = 'SELECT id FROM t'\n"
        "'''One autocommitted INSERT: no BEGIN.'''\n"
        "async def f(m, units):\n"
        "    async with UnitOfWork(m) as unit, m.begin() as session, units() as mine:\n"
        "        pass\n"
    )
    assert _sql(tree) == [
        "sqlalchemy.select",
        "sqlalchemy.dialects.postgresql",
        "SQL text: 'SELECT id FROM'",
    ]
    assert _transactions(tree) == [
        "sqlalchemy.ext.asyncio.async_sessionmaker",
        "UnitOfWork(...)",
        ".begin()",
    ]
    assert _units(tree) == ["notifyhub.db.unit.Units"]
