"""Output of a run: the printed table, ``results/<date>.json``, a markdown table for the README, a PNG bar plot."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import Comparison

__all__ = ["format_table", "markdown_table", "write_json", "plot", "human"]


def human(x: float, unit: str = "") -> str:
    if unit == "MB":
        return f"{x:.0f}"
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.2f}{suffix}"
    return f"{x:.1f}"


def _shown(actual: Any) -> str:
    if actual is None:
        return "-"
    if isinstance(actual, (int, float)):
        # Three decimals: a ratio of 0.896 against a 0.9 target must not print as 0.90.
        return human(float(actual)) if abs(actual) >= 1000 else f"{actual:.3f}"
    return str(actual)


def _rows(comp: Comparison) -> list[tuple[str, str, str, str]]:
    rows = []
    for r in comp.results:
        if r.ok:
            spread = f"{human(r.low, comp.unit)} .. {human(r.high, comp.unit)}"
            ratio = f"{r.ratio:.2f}x" if r.ratio is not None else "-"
            rows.append((r.name, human(r.median, comp.unit), spread, ratio))
        else:
            why = r.skipped or r.error or "no samples"
            rows.append((r.name, "-", "skipped: " + why[:70] if r.skipped else "FAILED: " + why[:70], "-"))
    return rows


def format_table(comps: Sequence[Comparison], targets: Sequence[dict[str, Any]]) -> str:
    lines = []
    for comp in comps:
        rounds = max((len(r.samples) for r in comp.results), default=0)
        lines.append(f"\n== {comp.title}  [{comp.unit}, median of {rounds}, ratio vs {comp.baseline}; "
                     f"load {comp.load_before[0]:.2f} -> {comp.load_after[0]:.2f}, {comp.wall_seconds:.0f} s]")
        rows = _rows(comp)
        widths = [max(len(row[i]) for row in rows + [("contender", "median", "min .. max", "ratio")])
                  for i in range(4)]
        header = ("contender", "median", "min .. max", "ratio")
        for row in [header] + rows:
            lines.append("  " + "  ".join(cell.ljust(w) if i in (0, 2) else cell.rjust(w)
                                          for i, (cell, w) in enumerate(zip(row, widths, strict=False))))
    if targets:
        lines.append("\n== targets")
        for t in targets:
            shown = _shown(t.get("actual"))
            extra = f" ({t['why']})" if "why" in t else ""
            paired = f"; per-round ratios {t['paired_ratios']}" if t.get("paired_ratios") else ""
            lines.append(f"  [{t['status']:>12}] {t['target']}: {shown} (required {t.get('required', '-')}"
                         f"{paired}){extra}")
    return "\n".join(lines)


def markdown_table(comps: Sequence[Comparison], targets: Sequence[dict[str, Any]]) -> str:
    out = ["| comparison | contender | median | min .. max | ratio |", "|---|---|---:|---|---:|"]
    for comp in comps:
        for i, (name, median, spread, ratio) in enumerate(_rows(comp)):
            label = f"{comp.title} ({comp.unit})" if i == 0 else ""
            out.append(f"| {label} | {name} | {median} | {spread} | {ratio} |")
    out += _cpu_tables(comps)
    out += _request_tables(comps)
    if targets:
        out += ["", "| target | result (ratio of medians) | per-round ratios | required | status |",
                "|---|---:|---|---|---|"]
        for t in targets:
            shown = _shown(t.get("actual"))
            rounds = ", ".join(f"{x:.2f}" for x in t.get("paired_ratios") or []) or "-"
            status = t["status"] + (f" ({t['why']})" if "why" in t else "")
            out.append(f"| {t['target']} | {shown} | {rounds} | {t.get('required', '-')} | {status} |")
    return "\n".join(out)


def _cpu_tables(comps: Sequence[Comparison]) -> list[str]:
    """Where the CPU went (median over rounds, microseconds per row), for comparisons that recorded it."""
    out: list[str] = []
    for comp in comps:
        rows = [r for r in comp.results if r.ok and r.extras and all("cpu_us_per_row" in e for e in r.extras)]
        if not rows:
            continue
        groups = list(rows[0].extras[0]["cpu_us_per_row"])
        out += ["", f"CPU per row in {comp.title} (microseconds, median of rounds; 2 cores = 2 s of CPU per s):", "",
                "| contender | " + " | ".join(groups) + " | total |", "|---|" + "---:|" * (len(groups) + 1)]
        for r in rows:
            per = {g: statistics.median(e["cpu_us_per_row"][g] for e in r.extras) for g in groups}
            cells = " | ".join(f"{per[g]:.2f}" for g in groups)
            out.append(f"| {r.name} | {cells} | {sum(per.values()):.2f} |")
        tasks = comp.params.get("partitions") if isinstance(comp.params, dict) else None
        if tasks and all("ms_per_task" in e for r in rows for e in r.extras):
            out += ["", f"Wall time per Spark task in {comp.title} ({tasks} tasks; median of rounds):", "",
                    "| contender | ms per task |", "|---|---:|"]
            out += [f"| {r.name} | {statistics.median(e['ms_per_task'] for e in r.extras):.1f} |" for r in rows]
    return out


def _request_tables(comps: Sequence[Comparison]) -> list[str]:
    """Requests per Spark task by API as the broker counted them (benchmarks.request_count), and Produce requests
    per MB written, median of rounds; micro-batch comparisons also show milliseconds per micro-batch."""
    out: list[str] = []
    for comp in comps:
        rows = [r for r in comp.results if r.ok and r.extras and all("requests_per_task" in e for e in r.extras)]
        if not rows:
            continue
        apis = [a for a in rows[0].extras[0]["requests_per_task"] if a != "other"]
        batches = all("ms_per_batch" in e for r in rows for e in r.extras)
        head = "| contender | " + " | ".join(apis) + " | Produce per MB |" + (" ms per batch |" if batches else "")
        out += ["", f"Requests per Spark task in {comp.title} (the broker's count, driver's EndTxn included; median "
                "of rounds):", "", head, "|---|" + "---:|" * (len(apis) + 1 + int(batches))]
        for r in rows:
            per = {a: statistics.median(e["requests_per_task"][a] for e in r.extras) for a in apis}
            cells = " | ".join(f"{per[a]:.2f}" for a in apis)
            mb = statistics.median(e["produce_per_MB"] for e in r.extras)
            tail = f" {statistics.median(e['ms_per_batch'] for e in r.extras):.0f} |" if batches else ""
            out.append(f"| {r.name} | {cells} | {mb:.3f} |{tail}")
        noop = next((r for r in comp.results if r.ok and r.extras and all("ms_per_batch" in e for e in r.extras)
                     and r not in rows), None)
        if batches and noop is not None:
            out.append(f"| {noop.name} | " + " | ".join("-" for _ in apis) + " | - | "
                       f"{statistics.median(e['ms_per_batch'] for e in noop.extras):.0f} |")
    return out


def write_json(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1, sort_keys=False, default=str) + "\n")


def plot(comps: Sequence[Comparison], path: Path, title: str) -> Path | None:
    """One panel per comparison: a bar per contender at its median, whiskers from min to max."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    shown = [c for c in comps if any(r.ok for r in c.results)]
    if not shown:
        return None
    cols = min(3, len(shown))
    nrows = math.ceil(len(shown) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(6.0 * cols, 3.6 * nrows), squeeze=False)
    palette = plt.get_cmap("tab20")
    names = list(dict.fromkeys(r.name for c in shown for r in c.results))  # first-seen order: stable colours
    color = {n: palette(i % 20) for i, n in enumerate(names)}
    for ax, comp in zip(axes.flat, shown, strict=False):
        ok = [r for r in comp.results if r.ok]
        medians = [r.median for r in ok]
        err = [[r.median - r.low for r in ok], [r.high - r.median for r in ok]]
        ypos = range(len(ok))
        ax.barh(list(ypos), medians, xerr=err, capsize=4, color=[color[r.name] for r in ok])
        ax.set_yticks(list(ypos), [r.name for r in ok], fontsize=8)
        ax.invert_yaxis()
        ax.set_title(comp.title, fontsize=9)
        ax.set_xlabel(comp.unit, fontsize=8)
        ax.tick_params(axis="x", labelsize=8)
        for y, r in zip(ypos, ok, strict=False):
            label = human(r.median, comp.unit) + (f"  {r.ratio:.2f}x" if r.ratio is not None else "")
            ax.text(r.high, y, "  " + label, va="center", fontsize=7)
        ax.margins(x=0.3)
    for ax in list(axes.flat)[len(shown):]:
        ax.axis("off")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0.0, 0.0, 1.0, 1.0 - 0.35 / (3.6 * nrows)))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
