"""Builder for the runner: one task per background loop of every feature."""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AsyncExitStack

from notifyhub.workers.runner import Loop, Runner


def runner(stack: AsyncExitStack, *loops: Iterable[Loop]) -> Runner:
    """The runner of these loops, not started (the hub starts it once every part is up);
    its loops are stopped before the parts they use are released."""
    made = Runner()
    for loop in (loop for group in loops for loop in group):
        made.add(loop)
    stack.push_async_callback(made.stop)
    return made
