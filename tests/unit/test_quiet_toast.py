"""notifyhub.js (and so its SharedWorker) shows no toast for a notification streamed
with `"quiet": true` (its user is in quiet hours; the inbox still shows it): its
`wantsToast`, run in Node as the worker loads the file (no `document`)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "src" / "notifyhub" / "static" / "notifyhub.js"


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node")
def test_a_quiet_notification_wants_no_toast() -> None:
    cases = [
        {"id": "a"},
        {"id": "b", "quiet": True},
        {"id": "c", "quiet": False},
        {"display": "inbox"},
    ]
    program = (
        f"require({json.dumps(str(SCRIPT))});"
        f"console.log(JSON.stringify({json.dumps(cases)}.map(globalThis.NotifyHub.internal.wantsToast)))"
    )
    found = subprocess.run(
        ["node", "-e", program], capture_output=True, text=True, timeout=30, check=True
    )
    assert json.loads(found.stdout) == [True, False, True, False]
