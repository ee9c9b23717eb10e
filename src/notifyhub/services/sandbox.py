"""Jinja2's immutable sandbox, charging every step of a render to a `Budget`.

The sandbox stops a template from reaching Python's internals, not from spending the
process: nested `range` loops hold the event loop for seconds, and a repeated string
grows the hub by its size (docs/scaling.md, "Design notes"). Here every loop step,
call and operator is charged, and anything a template builds is refused past `MAX_CHARS`:

    {% for %} ........ the iterable is wrapped (`_nh_steps`): a step per item
    call / operator .. a step each; `*`, `+`, `%`, `**` and width-taking methods
                       refused *before* building a result past MAX_CHARS
    `~` .............. checked the same way (`_nh_concat`)
    filters .......... width arguments checked first, results after
    output ........... counted chunk by chunk while rendering (`render`)

Past its steps or its time the budget raises `BudgetExceeded`; so a render costs at most
about `Budget.seconds` of the event loop. Constant folding is off: it would build
`'x' * 100000000` while compiling, at save time.
"""

from __future__ import annotations

import contextlib
import functools
import math
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from typing import Any

from jinja2 import StrictUndefined, nodes
from jinja2.exceptions import SecurityError
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.visitor import NodeTransformer

MAX_STEPS = 10_000
"""Loop iterations, calls and operators one render (or one event's renders) may take."""
MAX_SECONDS = 0.05
MAX_CHARS = 32 * 1024
"""The largest string or sequence a template may build, and its whole output."""
MAX_RANGE = 10_000
MAX_POWER_BITS = 4096
STEPS_NAME = "_nh_steps"
CONCAT_NAME = "_nh_concat"
_WIDTH_METHODS = frozenset({"center", "ljust", "rjust", "zfill", "expandtabs"})
_DIGITS = re.compile(r"\d+")
_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[#0 +-]*(\*|\d+)?(?:\.(\*|\d+))?")
"""A `%` conversion's width and precision."""
_BRACE_SPEC = re.compile(r"\{[^{}:]*:((?:[^{}]|\{[^{}]*\})*)\}")
"""A `str.format` field's spec (after the colon), nested `{}` fields included."""


class BudgetExceeded(SecurityError):
    """A render went past its steps, its time or its size limit."""


class Budget:
    """What renders may still spend: steps, and time (counted only while rendering)."""

    __slots__ = ("deadline", "seconds", "seconds_left", "steps")

    def __init__(self, steps: int = MAX_STEPS, seconds: float = MAX_SECONDS) -> None:
        self.steps = steps
        self.seconds = seconds
        self.seconds_left = seconds
        self.deadline = math.inf

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Charge this budget for a render: it is `CURRENT`, and its clock runs."""
        token = CURRENT.set(self)
        started = time.monotonic()
        self.deadline = started + self.seconds_left
        try:
            yield
        finally:
            self.seconds_left -= time.monotonic() - started
            self.deadline = math.inf
            CURRENT.reset(token)

    def step(self) -> None:
        self.steps -= 1
        if self.steps < 0:
            raise BudgetExceeded(f"template ran more than {MAX_STEPS} loop steps or calls")
        if time.monotonic() > self.deadline:
            raise BudgetExceeded(f"template took longer than {self.seconds * 1000:g} ms")


CURRENT: ContextVar[Budget] = ContextVar("notifyhub_template_budget")
"""The budget of the render running now (set by `templates.render`)."""


def sized(value: Any) -> Any:
    """`value`, unless it is a string or collection longer than MAX_CHARS."""
    if isinstance(value, str | bytes | list | tuple | dict) and len(value) > MAX_CHARS:
        raise BudgetExceeded(f"template built a value longer than {MAX_CHARS}")
    return value


def _refuse_over(size: float, what: str) -> None:
    if size > MAX_CHARS:
        raise BudgetExceeded(f"{what} would build more than {MAX_CHARS} characters")


def _length(value: Any) -> int | None:
    return len(value) if isinstance(value, str | bytes | list | tuple) else None


def _check_repeat(left: Any, right: Any) -> None:
    for seq, times in ((left, right), (right, left)):
        size = _length(seq)
        if size is not None and isinstance(times, int):
            _refuse_over(size * times, "`*`")


def _check_power(base: Any, exponent: Any) -> None:
    if not (isinstance(base, int) and isinstance(exponent, int)):
        return
    if abs(base) > 1 and exponent * abs(base).bit_length() > MAX_POWER_BITS:
        raise BudgetExceeded(f"`**` would build a number over {MAX_POWER_BITS} bits")


def check_widths(spec: str, args: Any = ()) -> None:
    """Widths and precisions in a `%` or `str.format` string, and those taken from args
    (`%*d`, `{:{}}`), refused past MAX_CHARS before anything is built."""
    percent = [w for match in _PERCENT_SPEC.findall(spec) for w in match]
    braces = _BRACE_SPEC.findall(spec)
    widths = [*percent, *(d for b in braces for d in _DIGITS.findall(b))]
    for width in filter(str.isdigit, widths):
        _refuse_over(int(width) if len(width) < 8 else math.inf, "a format width")
    if "*" in percent or any("{" in b for b in braces):
        values = args if isinstance(args, tuple | list) else (args,)
        for value in values:
            if isinstance(value, int):
                _refuse_over(value, "a format width")


def check_binop(operator: str, left: Any, right: Any) -> None:
    """Refuse an operation whose result would pass the limits, before computing it."""
    if operator == "*":
        _check_repeat(left, right)
    elif operator == "+":
        sizes = (_length(left), _length(right))
        if sizes[0] is not None and sizes[1] is not None:
            _refuse_over(sizes[0] + sizes[1], "`+`")
    elif operator == "**":
        _check_power(left, right)
    elif operator == "%" and isinstance(left, str):
        check_widths(left, right)


def _joined_size(parts: Any, separator: str) -> float:
    if not isinstance(parts, list | tuple):
        return 0  # an iterator: its result is checked once built
    lengths = (len(p) if isinstance(p, str) else 20 for p in parts)
    return sum(lengths) + len(separator) * max(len(parts) - 1, 0)


def check_call(obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Refuse a string method call whose result would pass the limits."""
    method = getattr(obj, "__wrapped__", obj)  # the sandbox wraps str.format
    owner, name = getattr(method, "__self__", None), getattr(method, "__name__", "")
    if not isinstance(owner, str):
        return
    if name in _WIDTH_METHODS:
        for value in (*args, *kwargs.values()):
            if isinstance(value, int):
                _refuse_over(value * (owner.count("\t") or 1), f"str.{name}")
    elif name in ("format", "format_map"):
        check_widths(owner, (*args, *kwargs.values()))
    elif name == "replace" and len(args) >= 2:
        old, new = str(args[0]), str(args[1])
        _refuse_over(len(owner) + (owner.count(old) + 1) * len(new), "str.replace")
    elif name == "join" and args:
        _refuse_over(_joined_size(args[0], owner), "str.join")


def _steps(iterable: Iterable[Any]) -> Iterator[Any]:
    """A loop's iterable, charging one step per item."""
    budget = CURRENT.get()
    for item in iterable:
        budget.step()
        yield item


def _concat(*parts: Any) -> str:
    """`a ~ b`, refused before it builds a string past MAX_CHARS."""
    texts = [str(part) for part in parts]
    _refuse_over(sum(map(len, texts)), "`~`")
    return "".join(texts)


def _range(*args: int) -> range:
    numbers = range(*args)
    if len(numbers) > MAX_RANGE:
        raise BudgetExceeded(f"range() is limited to {MAX_RANGE} items")
    return numbers


def _indent_size(s: Any, width: Any = 4, *args: Any, **kwargs: Any) -> float:
    lines = str(s).count("\n") + 1
    return lines * (len(width) if isinstance(width, str) else int(width)) + len(str(s))


def _replace_size(eval_ctx: Any, s: Any, old: Any, new: Any, *args: Any) -> float:
    text, old_text = str(s), str(old)
    return len(text) + (text.count(old_text) + 1) * len(str(new))


def _join_size(eval_ctx: Any, value: Any, d: str = "", *args: Any, **kwargs: Any) -> float:
    return _joined_size(value, d)


def _center_size(value: Any, width: Any = 80, *args: Any) -> float:
    return int(width)


_FILTER_SIZES: dict[str, Callable[..., float]] = {
    "center": _center_size,
    "indent": _indent_size,
    "replace": _replace_size,
    "join": _join_size,
}
"""For the built-in filters that can build big values from small arguments: the size
of what they would build."""


def _filter(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """A built-in filter whose result's size is checked first where it can be, and its
    result after."""
    size = _FILTER_SIZES.get(name)

    @functools.wraps(function)  # keeps its `jinja_pass_arg` (context, eval context)
    def checked(*args: Any, **kwargs: Any) -> Any:
        if size is not None:
            _refuse_over(size(*args, **kwargs), f"|{name}")
        elif name == "format" and args and isinstance(args[0], str):
            check_widths(args[0], args[1:])
        return sized(function(*args, **kwargs))

    return checked


class _Charged(NodeTransformer):
    """Rewrites a parsed template so its loops and `~` go through the budget."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        loop = self.generic_visit(node)
        assert isinstance(loop, nodes.For)
        assert isinstance(loop.iter, nodes.Expr)
        loop.iter = _call(STEPS_NAME, [loop.iter], loop.lineno)
        return loop

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        concat = self.generic_visit(node)
        assert isinstance(concat, nodes.Concat)
        return _call(CONCAT_NAME, list(concat.nodes), concat.lineno)


def _call(name: str, args: list[nodes.Expr], lineno: int) -> nodes.Call:
    call = nodes.Call(nodes.Name(name, "load"), args, [], None, None)
    call.set_lineno(lineno, override=True)
    return call


class BudgetedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, strict about undefined names, charging `CURRENT`."""

    intercepted_binops = frozenset({"*", "+", "**", "%"})

    def __init__(self, *, autoescape: bool = False) -> None:
        super().__init__(undefined=StrictUndefined, autoescape=autoescape, optimized=False)
        del self.globals["lipsum"]  # its `n` and sizes are unbounded
        self.globals.update({"range": _range, STEPS_NAME: _steps, CONCAT_NAME: _concat})
        self.filters = {name: _filter(name, f) for name, f in self.filters.items()}

    def charged(self, template: nodes.Template) -> nodes.Template:
        charged = _Charged().visit(template)
        assert isinstance(charged, nodes.Template)
        charged.set_environment(self)
        return charged

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        CURRENT.get().step()
        check_binop(operator, left, right)
        return sized(super().call_binop(context, operator, left, right))

    def call(
        __self,  # named as the sandbox names it, so a keyword `self` passes through
        __context: Context,
        __obj: Any,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        CURRENT.get().step()
        check_call(__obj, args, kwargs)
        return sized(super().call(__context, __obj, *args, **kwargs))
