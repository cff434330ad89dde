"""The run's checks of its own figures (docs/reports.md): nothing left allocated at a rung's start, a breakdown
whose phases hold its device time, the FLOPs its profiler counted against the formula's, the clocks read on a
GPU, paired ratios with no trend and no side-first effect. Each failure is named in Findings, and in a note."""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median

from .load import Run
from .stats import ALPHA, kendall_trend, mann_whitney_p

COVERAGE = 0.95  # a breakdown's phases hold at least this share of its device time
# Counted FLOPs over the formula's: below, matmuls the count missed; above, more than fc1's recompute (1.07).
FLOPS = (0.99, 1.10)
# Pairs that let each paired test reach p < 0.05: Kendall's tau at 5 (p = 2/5!); the U test at 4 against 4.
TREND_PAIRS, ORDER_PAIRS = 5, 8


@dataclass
class Check:
    check: str  # a few words for the Findings line
    rungs: list[str]  # the rungs (or references) it failed at, each with its figure
    means: str  # what it says of the run's figures
    checked: bool  # whether the run recorded the figure (older runs lack some; a CPU has no clocks)

    def names(self, most: int = 2) -> str:
        more = len(self.rungs) - most
        return ", ".join(self.rungs[:most]) + (f" and {more} more" if more > 0 else "")


def _clocks_unread(c) -> str:
    """Why a clock summary holds no samples ('' where it does)."""
    return "" if (c or {}).get("available") else (c or {}).get("why", "none recorded")


def checks(run: Run) -> list[Check]:
    """Each check with the rungs it failed at ([] where it passed) and whether the run recorded its figure."""
    held, coverage, flops, clocks = [], [], [], []
    gpu, ok = run.device.get("type") == "cuda", [r for r in run.rungs if r.ok]
    for r in ok:
        if (b := (r.held_at_start or {}).get("allocated_bytes") or 0) > 0:
            held.append(f"{r.name} ({b / 2**20:.0f} MiB)")
        if (c := (r.profile or {}).get("phase_coverage")) is not None and c < COVERAGE:
            coverage.append(f"{r.name} ({100 * c:.0f}%)")
        if (x := r.counted_vs_formula) is not None and not FLOPS[0] <= x <= FLOPS[1]:
            flops.append(f"{r.name} ({x:.3f}x)")
        if gpu and (why := _clocks_unread(r.clocks)):
            clocks.append(f"{r.name} ({why})")
    for ref in (ref for ref in run.references if gpu and ref.get("status") == "ok" and "clocks" in ref):
        for scope, c in {"": ref["clocks"], **(ref.get("compile_scope_clocks") or {})}.items():
            if why := _clocks_unread(c):
                clocks.append(f"{ref['name']}{' ' + scope if scope else ''} at batch "
                              f"{ref.get('config', {}).get('batch', '?')} ({why})")
    trend, order, paired = _paired(run)
    def moved_by(p: dict) -> str:
        return f"moved {p['movement']:.2f}x" + (f", {100 * p['core_share']:.0f}% of its cores" if p.get("busy") else "")
    moved = [f"{r.name} ({moved_by(r.paired)})" for r in ok if r.disturbed]
    return [
        Check("disturbed", moved, "the machine's speed moved more than the rung's difference, or other work took its "
              "cores, while it and the rung it is measured against were timed in pairs: its ratio is not claimed "
              "(docs/measurement.md: Pairs)",
              any(r.paired and "ratio" in r.paired for r in ok)),
        Check("memory held at start", held, "a rung before it left tensors allocated: its peak memory includes "
              "them", any(r.held_at_start is not None for r in ok)),
        Check("breakdown coverage", coverage, f"under {100 * COVERAGE:.0f}% of its breakdown's device time falls in "
              "a phase (data, forward, loss, backward, optimizer): the rest is \"other\", unaccounted for",
              any("phase_coverage" in (r.profile or {}) for r in ok)),
        Check("FLOP count", flops, f"the matmul FLOPs its profiler counted over the formula's, outside "
              f"{FLOPS[0]}-{FLOPS[1]}: below, matmuls the count does not see; above, more work than the model's "
              "(the MFU is the formula's either way)", any(r.counted_vs_formula is not None for r in ok)),
        Check("clocks", clocks, "no SM clock was sampled while it was timed: a slow timing cannot be told from "
              "a slow clock", gpu),
        Check("paired trend", trend, "the pairs' ratios (C++ over Python) move with their place in the run "
              "(Kendall's tau): the machine or the two processes changed while they ran, and the ratio's interval, "
              "which takes the pairs as alike, is too narrow", any(len(r) >= TREND_PAIRS for r in paired)),
        Check("paired order", order, "the pairs' ratios differ by which side ran first (even pairs C++ first, odd "
              "Python first; U test): one side's run slows the other's after it, which the alternation balances "
              "but the interval does not see", any(len(r) >= ORDER_PAIRS for r in paired)),
    ]


def _paired(run: Run) -> tuple[list[str], list[str], list[list[float]]]:
    """The paired references whose ratios trend with the pairs' order, those whose ratios differ by the side
    that ran first, and every paired reference's ratios. Each test at ALPHA over the references it tests
    (Bonferroni), so that a sound run with two references fails it about as often as one test would."""
    paired = [((ref.get("again") or {}).get("paired") or {}).get("ratios") or [] for ref in run.references]
    tested = [sum(len(r) >= n for r in paired) for n in (TREND_PAIRS, ORDER_PAIRS)]
    trend, order = [], []
    for ref, ratios in zip(run.references, paired):
        where = f"{ref.get('name', '?')} at batch {ref.get('config', {}).get('batch', '?')}"
        if len(ratios) >= TREND_PAIRS and (t := kendall_trend(ratios))[1] < ALPHA / tested[0]:
            trend.append(f"{where} (tau {t[0]:+.2f}, p {t[1]:.3f})")
        cpp_first, python_first = ratios[0::2], ratios[1::2]
        if len(ratios) >= ORDER_PAIRS and (p := mann_whitney_p(cpp_first, python_first)) < ALPHA / tested[1]:
            order.append(f"{where} (C++ first {median(cpp_first):.2f}x, Python first {median(python_first):.2f}x, "
                         f"p {p:.3f})")
    return trend, order, paired


def checks_words(run: Run) -> str:
    """The Findings' words: 'its own checks pass (…)', or which failed and where; '' where none was recorded."""
    done = [c for c in checks(run) if c.checked]
    if failed := [c for c in done if c.rungs]:
        return "its own checks fail: " + "; ".join(f"{c.check} at {c.names()}" for c in failed) + " (notes)"
    return f"its own checks pass ({', '.join(c.check for c in done)})" if done else ""


def check_notes(run: Run) -> list[str]:
    """A note for each failed check: every rung, its figure, and what it means."""
    return [f"check failed, {c.check}: {', '.join(c.rungs)}: {c.means}." for c in checks(run) if c.rungs]
