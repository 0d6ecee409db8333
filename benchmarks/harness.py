"""The comparison harness: contenders of one comparison run in this process, alternating, round after round.

A contender is a callable that does one complete measured run and returns a ``Sample`` (how many units it moved
and how long the measured part took; set-up such as building inputs or creating topics happens outside its own
timer). ``run_comparison`` calls every contender once per round, changing the order each round (forward, reversed,
rotated: see ``_round_order``) so no contender always runs first (cold caches) or always after the same neighbour,
and reports the median and the min..max spread of the rates, and each contender's median as a ratio of the
baseline's median.

Rates are "units per second" (records/s, rows/s) unless a comparison is a "lower is better" one (memory): then
the value is the sample's ``value`` (e.g. peak RSS in MB) and the ratio is still ``median / baseline median``.
"""

from __future__ import annotations

import os
import statistics
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Sample", "Contender", "ContenderResult", "Comparison", "Target", "run_comparison", "load_average",
           "select_contenders"]

# ``--contenders``: name fragments; a contender whose name contains none of them is not run (empty: run all).
_selected: tuple[str, ...] = ()


def select_contenders(fragments: Sequence[str]) -> None:
    """Run only contenders whose name contains one of ``fragments`` (``python -m benchmarks --contenders``), e.g. a
    5-round check of two sink contenders without the rest of the comparison."""
    global _selected
    _selected = tuple(f for f in fragments if f)


def _not_selected(name: str) -> str | None:
    if not _selected or any(f in name for f in _selected):
        return None
    return f"not selected (--contenders {','.join(_selected)})"



@dataclass(frozen=True)
class Sample:
    """One measured run: ``units`` moved in ``seconds`` (its own timer), or a plain ``value`` (e.g. MB)."""

    units: float = 0.0
    seconds: float = 0.0
    value: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def measure(self) -> float:
        if self.value is not None:
            return self.value
        return self.units / self.seconds if self.seconds > 0 else 0.0


@dataclass
class Contender:
    """A named measured run. ``unavailable`` (a reason) keeps it in the report as skipped, never run."""

    name: str
    run: Callable[[], Sample]
    unavailable: str | None = None


@dataclass
class ContenderResult:
    name: str
    samples: list[float] = field(default_factory=list)
    extras: list[dict[str, Any]] = field(default_factory=list)
    skipped: str | None = None
    error: str | None = None
    ratio: float | None = None  # median / baseline median

    @property
    def ok(self) -> bool:
        return bool(self.samples) and self.skipped is None and self.error is None

    @property
    def median(self) -> float:
        return statistics.median(self.samples) if self.samples else 0.0

    @property
    def low(self) -> float:
        return min(self.samples) if self.samples else 0.0

    @property
    def high(self) -> float:
        return max(self.samples) if self.samples else 0.0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.ok:
            out.update(median=self.median, min=self.low, max=self.high, ratio=self.ratio, samples=self.samples)
            if any(self.extras):
                out["extras"] = self.extras
        if self.skipped:
            out["skipped"] = self.skipped
        if self.error:
            out["error"] = self.error
        return out


@dataclass
class Comparison:
    """The results of one comparison (one workload point): contenders, baseline, parameters, load around it."""

    group: str  # "encoder", "producer", "spark", "memory"
    title: str
    unit: str
    baseline: str
    params: dict[str, Any]
    results: list[ContenderResult]
    higher_is_better: bool = True
    load_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    wall_seconds: float = 0.0

    def result(self, name: str) -> ContenderResult | None:
        return next((r for r in self.results if r.name == name), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group, "title": self.title, "unit": self.unit, "baseline": self.baseline,
            "higher_is_better": self.higher_is_better, "params": self.params,
            "load_before": self.load_before, "load_after": self.load_after,
            "wall_seconds": round(self.wall_seconds, 1),
            "contenders": [r.to_json() for r in self.results],
        }


@dataclass(frozen=True)
class Target:
    """A goal from the benchmark issue: ``subject`` vs ``reference`` in one comparison, ratio >= ``at_least``
    (or, for an absolute goal, ``subject``'s median >= / <= ``absolute``)."""

    group: str
    name: str
    comparison: str  # Comparison.title
    subject: str
    reference: str | None = None
    at_least: float | None = None
    at_most_abs: float | None = None
    at_least_abs: float | None = None

    def evaluate(self, comps: Sequence[Comparison]) -> dict[str, Any]:
        out: dict[str, Any] = {"target": self.name, "comparison": self.comparison}
        comp = next((c for c in comps if c.title == self.comparison), None)
        subj = comp.result(self.subject) if comp else None
        if comp is None or subj is None or not subj.ok:
            why = "comparison not run" if comp is None else (
                subj.skipped or subj.error if subj else f"no contender {self.subject}")
            return {**out, "status": "not measured", "why": why}
        if self.reference is not None:
            ref = comp.result(self.reference)
            if ref is None or not ref.ok or ref.median == 0:
                return {**out, "status": "not measured", "why": f"reference {self.reference} did not run"}
            actual = subj.median / ref.median
            met = actual >= (self.at_least or 0.0)
            result = {**out, "status": "met" if met else "missed", "actual": round(actual, 3),
                      "required": self.at_least}
            if len(subj.samples) == len(ref.samples):
                # The same round's runs ran minutes apart at most: their ratio is less exposed to a machine that
                # is busier in one round than another. Reported beside the status, which is the ratio of medians.
                paired = [a / b for a, b in zip(subj.samples, ref.samples, strict=False) if b > 0]
                result["paired_ratios"] = [round(x, 3) for x in paired]
                result["paired_median"] = round(statistics.median(paired), 3) if paired else None
            return result
        value = subj.median
        if self.at_least_abs is not None:
            return {**out, "status": "met" if value >= self.at_least_abs else "missed", "actual": value,
                    "required": f">= {self.at_least_abs:,.0f}"}
        if self.at_most_abs is None:
            raise ValueError(f"target {self.name} has no bound")
        return {**out, "status": "met" if value <= self.at_most_abs else "missed", "actual": value,
                "required": f"<= {self.at_most_abs:,.0f}"}


def load_average() -> tuple[float, float, float]:
    try:
        one, five, fifteen = os.getloadavg()
        return (round(one, 2), round(five, 2), round(fifteen, 2))
    except OSError:
        return (0.0, 0.0, 0.0)


def run_comparison(group: str, title: str, unit: str, contenders: Sequence[Contender], rounds: int,
                   params: dict[str, Any] | None = None, higher_is_better: bool = True,
                   log: Callable[[str], None] = print, warmup: bool = False) -> Comparison:
    """Run every available contender ``rounds`` times, alternating; the first contender is the baseline.
    ``warmup``: first run each contender once, unmeasured (JVM JIT, Python workers and their imports, broker
    page cache and connections: a first run paid for them, a round-1 penalty that fell on whoever went first)."""
    if rounds < 1:
        raise ValueError("rounds must be >= 1")
    results = [ContenderResult(c.name, skipped=c.unavailable or _not_selected(c.name)) for c in contenders]
    live = [(c, r) for c, r in zip(contenders, results, strict=False) if r.skipped is None]
    comp = Comparison(group, title, unit, contenders[0].name, dict(params or {}), results, higher_is_better,
                      load_before=load_average())
    start = time.monotonic()
    if warmup:
        comp.params["warmup_runs"] = 1
        for contender, _ in live:
            sample, _failures = _run_once(contender, log)
            if sample is not None:
                log(f"    warm-up {contender.name}: {_fmt(sample.measure)} {unit} (not counted)")
    for rnd in range(rounds):
        for contender, result in _round_order(live, rnd):
            if result.error is not None:
                continue  # a contender that failed twice in a row is not run again: its error is the result
            sample, failures = _run_once(contender, log)
            if sample is None:
                result.error = failures[-1]
                continue
            result.samples.append(sample.measure)
            result.extras.append({**sample.extra, "failed_first": failures[0]} if failures else sample.extra)
            log(f"    round {rnd + 1}/{rounds} {contender.name}: {_fmt(sample.measure)} {unit}")
    comp.wall_seconds = time.monotonic() - start
    comp.load_after = load_average()
    base = results[0]
    for r in results:
        if r.ok and base.ok and base.median > 0:
            r.ratio = round(r.median / base.median, 3)
    return comp


def _run_once(contender: Contender, log: Callable[[str], None]) -> tuple[Sample | None, list[str]]:
    """One measured run; a run that fails is tried once more (a shared machine can stall a broker long enough
    for a delivery timeout), and the failure is kept in the sample's extras. Two failures in a row: the error."""
    failures: list[str] = []
    for _ in range(2):
        try:
            return contender.run(), failures
        except Exception as exc:  # a broken contender must not take the whole run down
            failures.append(f"{type(exc).__name__}: {_first_lines(str(exc))}")
            log(f"    {contender.name}: FAILED {failures[-1]}")
            log("      " + traceback.format_exc(limit=3).replace("\n", "\n      "))
    return None, failures


def _round_order(live: list[Any], rnd: int) -> list[Any]:
    """Round 0 in the given order, round 1 reversed, round 2 rotated by one, round 3 that reversed, ...: no
    contender always goes first, and no contender always follows the same neighbour (whose leftovers, such as a
    broker still deleting the previous topic's files, it would otherwise always inherit)."""
    if not live:
        return []
    k = (rnd // 2) % len(live)
    order = live[k:] + live[:k]
    return order[::-1] if rnd % 2 else order


def _first_lines(text: str, limit: int = 400) -> str:
    """Spark errors carry whole Python tracebacks: keep their head and the last line (the actual error)."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    if len(lines) <= 2:
        return text.strip()[:limit]
    return (lines[0][:limit // 2] + " ... " + lines[-1].strip()[:limit // 2])


def _fmt(x: float) -> str:
    if x >= 1e6:
        return f"{x / 1e6:.2f}M"
    if x >= 1e3:
        return f"{x / 1e3:.1f}k"
    return f"{x:.1f}"
