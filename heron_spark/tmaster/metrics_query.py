"""Heron's metrics query language, parsed and evaluated over the TMaster's metrics history.

The language of Heron's tracker (``/topologies/metrics/query``)::

    TS(component, instance | *, metric)     one time series per instance
    DEFAULT(constant, expr)                 fill missing (or 0) minutes with the constant
    SUM(expr | constant, ...)               one series: the sum per minute
    MAX(expr | constant, ...)               one series: the maximum per minute
    PERCENTILE(q, expr, ...)                one series: the q-th percentile (0..100) per minute
    DIVIDE(a, b)  MULTIPLY(a, b)  SUBTRACT(a, b)
                                            per instance when both sides have instances,
                                            else the one-series side applies to every series
    RATE(expr)                              change from the minute before, per series

A series is (instance or None, {minute start secs: value}); every minute considered lies in
[start, end]. ``evaluate`` returns Heron's response timeline: a list of
``{"instance": id or None, "data": {"<minute secs>": "<value>"}}`` (strings, as Heron's).

I/O-free: ``fetch(component, instance or None, metric, start, end)`` supplies the data
(instance id -> {bucket secs: value}). Pure; any thread. A malformed query raises
``MetricsQueryError`` naming the bad token and its position.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Callable

from heron_spark.errors import MetricsQueryError

Fetch = Callable[[str, "str | None", str, int, int], dict[str, dict[int, float]]]
_TOKEN = re.compile(r"\s*(?:([(),])|([^(),\s]+))")
_NUMBER = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")
OPERATORS = ("TS", "DEFAULT", "SUM", "MAX", "PERCENTILE", "DIVIDE", "MULTIPLY", "SUBTRACT",
             "RATE")


@dataclasses.dataclass
class Call:
    """A parsed operator call: its name, arguments (Call, float or bare word) and position."""

    name: str
    args: list
    position: int


@dataclasses.dataclass
class Series:
    """One time series: the instance it belongs to (None: an aggregate) and minute -> value."""

    instance: str | None
    timeline: dict[int, float]


# ---- parsing ---------------------------------------------------------------------------------
def tokenize(query: str) -> list[tuple[str, int]]:
    """Split ``query`` into (token, position) pairs: parentheses, commas and words."""
    tokens, pos = [], 0
    while pos < len(query):
        match = _TOKEN.match(query, pos)
        if match is None:  # only trailing blanks are left
            break
        token = match.group(1) or match.group(2)
        tokens.append((token, match.start(1) if match.group(1) else match.start(2)))
        pos = match.end()
    return tokens


def parse(query: str) -> Call:
    """Parse ``query`` into its operator tree; raise MetricsQueryError on a malformed one."""
    tokens = tokenize(query)
    if not tokens:
        msg = "the query is empty"
        raise MetricsQueryError(msg, query=query, token="", position=0,
                                fix="write an expression such as TS(component,*,__emit-count/default)")
    node, index = _parse_term(query, tokens, 0)
    if not isinstance(node, Call):
        token, position = tokens[0]
        msg = "a query must be an operator call"
        raise MetricsQueryError(msg, query=query, token=token,
                                position=position, fix=f"start with one of {', '.join(OPERATORS)}")
    if index != len(tokens):
        token, position = tokens[index]
        msg = "unexpected text after the end of the expression"
        raise MetricsQueryError(msg, query=query,
                                token=token, position=position, fix="remove it or balance the parentheses")
    return node


def _parse_term(query: str, tokens: list, index: int):
    if index >= len(tokens):
        msg = "the query ends too early"
        raise MetricsQueryError(msg, query=query, token="",
                                position=len(query), fix="close every operator's parentheses")
    token, position = tokens[index]
    if token in "(),":
        msg = f"unexpected {token!r}"
        raise MetricsQueryError(msg, query=query, token=token,
                                position=position, fix="put an argument here")
    if index + 1 < len(tokens) and tokens[index + 1][0] == "(":
        name = token.upper()
        if name not in OPERATORS:
            msg = f"unknown operator {token!r}"
            raise MetricsQueryError(msg, query=query, token=token,
                                    position=position, fix=f"use one of {', '.join(OPERATORS)}")
        args, index = [], index + 2
        while True:
            arg, index = _parse_term(query, tokens, index)
            args.append(arg)
            if index >= len(tokens):
                msg = f"{name}( is never closed"
                raise MetricsQueryError(msg, query=query, token=token,
                                        position=position, fix="add the missing ')'")
            sep, sep_pos = tokens[index]
            index += 1
            if sep == ")":
                break
            if sep != ",":
                msg = f"expected ',' or ')' in {name}"
                raise MetricsQueryError(msg, query=query,
                                        token=sep, position=sep_pos,
                                        fix="separate arguments with commas")
        call = Call(name, args, position)
        _check(query, call)
        return call, index
    if _NUMBER.match(token):
        return float(token), index + 1
    return token, index + 1


def _check(query: str, call: Call) -> None:
    """Check an operator's argument count and kinds (Heron's rules)."""
    name, args = call.name, call.args

    def bad(problem: str, fix: str) -> MetricsQueryError:
        return MetricsQueryError(f"{name}: {problem}", query=query, token=name,
                                 position=call.position, fix=fix)

    if name == "TS":
        if len(args) != 3 or not all(isinstance(a, str) for a in args):
            msg = "expects 3 names"
            raise bad(msg, "write TS(component, instance or *, metric)")
    elif name == "DEFAULT":
        if len(args) != 2 or not isinstance(args[0], float) or not isinstance(args[1], Call):
            msg = "expects a constant and an expression"
            raise bad(msg, "write DEFAULT(0, TS(...))")
    elif name in ("SUM", "MAX"):
        if not args or any(isinstance(a, str) for a in args):
            msg = "expects expressions or constants"
            raise bad(msg, f"write {name}(TS(...), ...)")
    elif name == "PERCENTILE":
        if len(args) < 2 or not isinstance(args[0], float) or not 0 <= args[0] <= 100 \
                or any(isinstance(a, str) for a in args[1:]):
            msg = "expects a quantile 0..100 then expressions"
            raise bad(msg, "write PERCENTILE(99, TS(...), ...)")
    elif name in ("DIVIDE", "MULTIPLY", "SUBTRACT"):
        if len(args) != 2 or any(isinstance(a, str) for a in args):
            msg = "expects exactly two expressions or constants"
            raise bad(msg, f"write {name}(a, b)")
        if name == "DIVIDE" and args[1] == 0.0:
            msg = "divides by the constant 0"
            raise bad(msg, "divide by something else")
    elif name == "RATE":
        if len(args) != 1 or not isinstance(args[0], Call):
            msg = "expects one expression"
            raise bad(msg, "write RATE(TS(...))")


# ---- evaluation ------------------------------------------------------------------------------
class Evaluator:
    """Evaluate parsed queries over minutes of ``bucket_secs`` in [start, end]."""

    def __init__(self, fetch: Fetch, bucket_secs: int = 60) -> None:
        self.fetch = fetch
        self.step = bucket_secs

    def run(self, query: str, start: int, end: int) -> list[dict]:
        """Parse and evaluate ``query``; return Heron's timeline list."""
        if start > end:
            msg = "starttime is after endtime"
            raise MetricsQueryError(msg, query=query,
                                    token=str(start), position=0, fix="swap them")
        out = self.evaluate(parse(query), int(start), int(end))
        return [{"instance": s.instance,
                 "data": {str(t): repr(float(v)) for t, v in sorted(s.timeline.items())}}
                for s in out]

    def minutes(self, start: int, end: int) -> range:
        """Every bucket start in [start, end]."""
        first = -(-start // self.step) * self.step
        return range(first, end // self.step * self.step + 1, self.step)

    def _constant(self, value: float, start: int, end: int) -> Series:
        return Series(None, dict.fromkeys(self.minutes(start, end), value))

    def evaluate(self, node, start: int, end: int) -> list[Series]:
        """Return the series ``node`` stands for (a constant: one series, every minute)."""
        if isinstance(node, float):
            return [self._constant(node, start, end)]
        return getattr(self, "_" + node.name.lower())(node.args, start, end)

    def _ts(self, args, start, end):
        component, instance, metric = args
        data = self.fetch(component, None if instance == "*" else instance, metric,
                          start - self.step, end + self.step)
        out = []
        for inst, timeline in sorted(data.items()):
            kept = {}
            for stamp, value in timeline.items():
                stamp = int(stamp) // self.step * self.step
                if start <= stamp <= end and not math.isnan(value):
                    kept[stamp] = float(value)
            out.append(Series(inst, kept))
        return out

    def _default(self, args, start, end):
        constant, expr = args
        out = self.evaluate(expr, start, end)
        for series in out:
            for stamp in self.minutes(start, end):
                if series.timeline.get(stamp, 0) == 0:
                    series.timeline[stamp] = constant
        return out

    def _split(self, args):
        return sum(a for a in args if isinstance(a, float)), [a for a in args if isinstance(a, Call)]

    def _sum(self, args, start, end):
        constants, exprs = self._split(args)
        result = self._constant(constants, start, end)
        for expr in exprs:
            for series in self.evaluate(expr, start, end):
                for stamp, value in series.timeline.items():
                    if stamp in result.timeline:
                        result.timeline[stamp] += value
        return [result]

    def _max(self, args, start, end):
        constants = [a for a in args if isinstance(a, float)]
        result = self._constant(max(constants), start, end) if constants else Series(None, {})
        for expr in (a for a in args if isinstance(a, Call)):
            for series in self.evaluate(expr, start, end):
                for stamp, value in series.timeline.items():
                    if start <= stamp <= end:
                        result.timeline[stamp] = max(value, result.timeline.get(stamp, value))
        return [result]

    def _percentile(self, args, start, end):
        quantile, exprs = args[0], [a for a in args[1:] if isinstance(a, Call)]
        values: dict[int, list[float]] = {}
        for expr in exprs:
            for series in self.evaluate(expr, start, end):
                for stamp, value in series.timeline.items():
                    if start <= stamp <= end:
                        values.setdefault(stamp, []).append(value)
        return [Series(None, {stamp: sorted(vs)[int(quantile * (len(vs) - 1) / 100.0)]
                              for stamp, vs in values.items()})]

    def _divide(self, args, start, end):
        return self._binary(args, start, end, lambda a, b: a / b, skip_zero=True)

    def _multiply(self, args, start, end):
        return self._binary(args, start, end, lambda a, b: a * b)

    def _subtract(self, args, start, end):
        return self._binary(args, start, end, lambda a, b: a - b)

    def _operand(self, node, start, end) -> tuple[bool, dict]:
        """Return (multivariate, instance or '' -> series) of one side of a binary operator."""
        out = self.evaluate(node, start, end)
        if len(out) == 1 and not out[0].instance:
            return False, {"": out[0]}
        return True, {s.instance or "": s for s in out}

    def _binary(self, args, start, end, op, skip_zero: bool = False) -> list[Series]:
        multi1, left = self._operand(args[0], start, end)
        multi2, right = self._operand(args[1], start, end)

        def combine(instance, a: Series, b: Series) -> Series:
            timeline = {}
            for stamp, value in a.timeline.items():
                other = b.timeline.get(stamp)
                if other is None or (skip_zero and other == 0):
                    continue
                timeline[stamp] = op(value, other)
            return Series(instance, timeline)

        if multi1 and multi2:
            return [combine(key, left[key], right[key]) for key in left if key in right]
        if not multi1:
            return [combine(s.instance, left[""], s) for s in right.values()] if multi2 \
                else [combine(None, left[""], right[""])]
        return [combine(s.instance, s, right[""]) for s in left.values()]

    def _rate(self, args, start, end):
        out = self.evaluate(args[0], start - self.step, end)
        for series in out:
            stamps = sorted(series.timeline)
            series.timeline = {
                stamp: series.timeline[stamp] - series.timeline[prev]
                for prev, stamp in zip(stamps, stamps[1:])
                if start <= stamp <= end and stamp - prev == self.step}
        return out
