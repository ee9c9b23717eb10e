"""The types: `tsc --noEmit` in clients/react (strict mode) checks @notifyhub/react, the React
sample and sample/plain.ts, which uses notifyhub.js through notifyhub.d.ts; the package
builds; and notifyhub.d.ts names exactly what notifyhub.js exports in a browser."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from support import npm

pytestmark = [pytest.mark.slow, pytest.mark.timeout(npm.NPM_CI_TIMEOUT_S + 120)]

TYPES = Path(__file__).resolve().parents[2] / "src" / "notifyhub" / "static" / "notifyhub.d.ts"


@pytest.fixture(scope="module")
def toolchain() -> None:
    took = npm.node_modules()
    print(f"\nnpm ci: {took:.1f} s" if took else "\nnpm ci: cached")


def test_tsc_no_emit(toolchain: None) -> None:
    started = time.monotonic()
    done = npm.run_bin("tsc", "--noEmit", "-p", ".")
    print(f"tsc --noEmit: {time.monotonic() - started:.1f} s")
    assert done.returncode == 0, done.stdout + done.stderr


def test_package_builds(toolchain: None, tmp_path: Path) -> None:
    done = npm.run_bin("tsc", "-p", "tsconfig.build.json", "--outDir", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    index = (tmp_path / "index.d.ts").read_text()
    assert "NotifyHubProvider" in index and 'from "./notifyhub.js"' in index
    assert {p.name for p in tmp_path.glob("*.js")} >= {"index.js", "hooks.js", "Inbox.js"}


def members(interface: str) -> list[str]:
    """The member names of one `export interface` of notifyhub.d.ts."""
    found = re.search(
        rf"^export interface {interface} \{{\n(.*?)^\}}", TYPES.read_text(), re.M | re.S
    )
    assert found is not None, interface
    return sorted(set(re.findall(r"^  (?:readonly )?(\w+)\??[(:<]", found.group(1), re.M)))


RUNTIME_NAMES = """() => {
  const client = new NotifyHub.NotifyHubClient({ getStreamToken: () => "unused" });  // not started
  const proto = Object.getOwnPropertyNames(NotifyHub.NotifyHubClient.prototype);
  const pub = (names) => names.filter((n) => n !== "constructor" && !n.startsWith("_")).sort();
  return {
    global: pub(Object.keys(NotifyHub)),
    client: pub([...proto, ...Object.keys(client)]),
    internal: pub(Object.keys(NotifyHub.internal)),
  };
}"""


async def test_types_name_what_the_script_exports(browser: Any, browser_hub: Any) -> None:
    page = await browser.new_page()
    try:
        await page.goto(f"{browser_hub.base_url}/demo")  # no token: the sign-in form
        await page.wait_for_function("() => typeof NotifyHub === 'object'")
        runtime = await page.evaluate(RUNTIME_NAMES)
    finally:
        await page.close()
    assert runtime["global"] == members("NotifyHubGlobal")
    assert runtime["client"] == members("NotifyHubClient")
    assert runtime["internal"] == members("NotifyHubInternal")


def test_readme_example_is_the_checked_one() -> None:
    """The docs' React example (docs/clients.md) is clients/react/sample/readme.tsx, which
    tsc checks."""
    page = (npm.REACT_DIR.parents[1] / "docs" / "clients.md").read_text()
    found = re.search(r"^## React\n.*?^```tsx\n(.*?)^```", page, re.M | re.S)
    assert found is not None
    assert found.group(1) == (npm.REACT_DIR / "sample" / "readme.tsx").read_text()
