"""Print `name==floor` for the named packages, the lowest versions pyproject.toml allows
(`make test-compat` installs the suite's core at them)."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

REQUIREMENT = re.compile(r"^([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*(.*)$")
FLOOR = re.compile(r">=\s*([^,;\s]+)")


def floors(pyproject: Path) -> dict[str, str]:
    """Every declared package's `>=` floor, by normalized name."""
    project = tomllib.loads(pyproject.read_text())["project"]
    declared = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        declared.extend(extra)
    found: dict[str, str] = {}
    for line in declared:
        match = REQUIREMENT.match(line.strip())
        floor = FLOOR.search(match.group(3)) if match else None
        if match and floor:
            found[re.sub(r"[-_.]+", "-", match.group(1)).lower()] = floor.group(1)
    return found


def main(names: list[str]) -> int:
    known = floors(Path(__file__).resolve().parents[1] / "pyproject.toml")
    missing = [name for name in names if name not in known]
    if missing:
        print(f"no >= floor in pyproject.toml for {', '.join(missing)}", file=sys.stderr)
        return 2
    print("\n".join(f"{name}=={known[name]}" for name in names))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
