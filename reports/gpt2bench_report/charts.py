"""The report's charts, as matplotlib Figures (tests read their data from the figure objects)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
matplotlib.rcParams["figure.max_open_warning"] = 0  # a report of several runs holds all its figures until written
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from .load import Run, rung_roles  # noqa: E402
from .stats import against_previous  # noqa: E402

GIB = float(2**30)  # memory is shown in GiB: an "80 GB" H100 holds 79.2 GiB (85.0e9 bytes)


def fmt(v, spec=",.0f") -> str:
    """A number for a table cell ("-" for none); the report's tables share it."""
    return "-" if v is None else format(v, spec)

PUBLISHED = json.loads((Path(__file__).with_name("published.json")).read_text())
PHASES = ["data", "forward", "loss", "backward", "optimizer"]
# The breakdown's kinds of work (bench/measure/profiler.cpp's category), in the chart's stacking order.
CATEGORIES = ["matmul", "attention", "normalization", "elementwise", "embedding", "loss", "optimizer", "memcpy",
              "other"]


def _ok(run: Run):
    return [r for r in run.rungs if r.ok]


def ladder_chart(run: Run) -> plt.Figure:
    """Two panels. Left: tok/s per rung as horizontal bars (names read level), each labelled with its speed-up over
    the previous rung (and its noise state) and over the baseline, and its parity mark. Right: the speed-up over the
    baseline on an axis of its own, ours beside the published seed-000 A100's for the rungs this run reproduces."""
    rungs = _ok(run)
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, max(3.5, 0.32 * len(rungs) + 1.6)), sharey=True,
                                  gridspec_kw={"width_ratios": [3, 2]})
    names = [r.name for r in rungs]
    tps = [r.tokens_per_sec for r in rungs]
    y = list(range(len(rungs)))
    bars = ax.barh(y, tps, color=["#c0392b" if r.parity_verdict == "fail" else "#2e86c1" for r in rungs],
                   label="measured tok/s")
    base = tps[0] if tps else 1.0
    for bar, r in zip(bars, rungs):
        prev = run.previous(r)
        label = f"{run.vs_base(r):.2f}x base"
        if prev:
            state = against_previous(run, r)[0]
            label = f"{run.ratio(r, prev):.2f}x prev" + ("" if state == "real" else f" ({state})") + ", " + label
        mark = {"pass": " ✓", "fail": " ✗ parity"}.get(r.parity_verdict, "")
        ax.annotate(label + mark, (bar.get_width(), bar.get_y() + bar.get_height() / 2), xytext=(3, 0),
                    textcoords="offset points", ha="left", va="center", fontsize=7)
    ax.set_yticks(y, names, fontsize=8)
    ax.invert_yaxis()  # the baseline at the top, the ladder read downwards
    ax.set_xlim(0, 1.6 * max(tps, default=1.0))  # room for the labels beside the longest bar
    ax.set_xlabel("tokens / s (measured)")
    ax.set_title(f"Ladder: {run.profile} on {run.device_name}", fontsize=10)
    # Our speed-up and the published seed-000 A100's, over each one's own baseline.
    ax2.plot([t / base for t in tps], y, "o", color="#2e86c1", label="this run")
    pub = {p["rung"]: p["tokens_per_sec"] for p in PUBLISHED["seed000_a100"]["rungs"]}
    xs, ys = [], []
    for i, r in enumerate(rungs):
        if r.published_rung in pub:
            xs.append(pub[r.published_rung] / pub[0])
            ys.append(i)
    ax2.plot(xs, ys, "k--s", markersize=4, label="published speedup (seed 000, 1x A100)")
    ax2.set_xscale("log")
    top = max([t / base for t in tps] + xs + [1.0])
    ticks = [t for t in (1, 2, 5, 10, 20, 50, 100) if t <= 1.5 * top]
    ax2.set_xticks(ticks, [f"{t}x" for t in ticks])
    ax2.minorticks_off()
    ax2.set_xlabel("speed-up over the baseline (log)")
    ax2.grid(axis="x", alpha=0.3)
    ax2.legend(loc="upper right", fontsize=7)
    fig.tight_layout()
    return fig


def memory_chart(run: Run) -> plt.Figure:
    rungs = _ok(run)
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(rungs) + 2), 4))
    x = range(len(rungs))
    ax.bar([i - 0.2 for i in x], [r.peak_alloc_bytes / GIB for r in rungs], 0.4, label="peak allocated")
    cuda = run.device.get("type") == "cuda"
    ax.bar([i + 0.2 for i in x], [r.peak_reserved_bytes / GIB for r in rungs], 0.4,
           label="peak reserved" if cuda else "process peak RSS")
    ax.set_xticks(list(x), [r.name for r in rungs], rotation=60, fontsize=8)
    ax.set_ylabel("GiB (2^30 bytes)")
    ax.set_title("Memory per rung")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def mfu_chart(run: Run) -> plt.Figure:
    rungs = _ok(run)
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(rungs) + 2), 4))
    ax.bar([r.name for r in rungs], [100 * (r.mfu or 0) for r in rungs], color="#27ae60")
    ax.set_ylabel("MFU (%)")
    ax.set_title("MFU: model FLOPs (matmuls, 6(12LC²+VC) + 6LCT per token) / one peak for all rungs", fontsize=9)
    ax.tick_params(axis="x", rotation=60, labelsize=8)
    fig.tight_layout()
    return fig


def phase_chart(run: Run) -> plt.Figure | None:
    """ms per 1,000 tokens (not per step, so batch-scaled rungs compare), each phase of the breakdown pass
    stacked, the breakdown step's time left unattributed to a phase hatched above them, and the timed step
    (the median of the repetitions) marked: where the stack ends below the mark, the time went nowhere the
    pass saw."""
    return _breakdown_stack(run, "phase_ms", [(p, p) for p in PHASES] + [("other", "other (outside the phases)")],
                            "Where the time goes, per 1,000 tokens (breakdown pass; timed step marked)")


def category_chart(run: Run) -> plt.Figure | None:
    """The same stack by kind of work (matmul, attention, normalization, ...: the breakdown's categories), so a
    rung's gain shows where it came from (native layers: normalization; SDPA: attention)."""
    rungs = [r for r in _ok(run) if r.profile and r.profile.get("category_ms")]
    extra = sorted({c for r in rungs for c in r.profile["category_ms"]} - set(CATEGORIES))
    return _breakdown_stack(run, "category_ms", [(c, c) for c in CATEGORIES + extra],
                            "By kind of work, per 1,000 tokens (breakdown pass; timed step marked)")


def _breakdown_stack(run: Run, key: str, parts: list[tuple[str, str]], title: str) -> plt.Figure | None:
    """Each rung's breakdown[key] (ms per step) per 1,000 tokens, the parts stacked in order, labelled."""
    rungs = [r for r in _ok(run) if r.profile and r.tokens_per_step and r.profile.get(key)]
    if not rungs:
        return None
    per_1k = [1000.0 / r.tokens_per_step for r in rungs]
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(rungs) + 2), 4.2))
    names = [r.name for r in rungs]
    bottom = [0.0] * len(rungs)
    for part, label in parts:
        vals = [r.profile[key].get(part, 0.0) * k for r, k in zip(rungs, per_1k)]
        ax.bar(names, vals, bottom=bottom, label=label)
        bottom = [b + v for b, v in zip(bottom, vals)]
    gap = [max(0.0, (r.profile.get("step_ms") or 0.0) * k - b) for r, k, b in zip(rungs, per_1k, bottom)]
    ax.bar(names, gap, bottom=bottom, label="unattributed (breakdown step)", color="white", edgecolor="#7f8c8d",
           hatch="//")
    timed = [(r.step_ms or 0.0) * k for r, k in zip(rungs, per_1k)]
    ax.plot(names, timed, linestyle="none", marker="_", markersize=22, markeredgewidth=2.5, color="k",
            label="timed step (median)", zorder=5)
    ax.set_ylabel("ms per 1,000 tokens")
    ax.set_title(title)
    ax.tick_params(axis="x", rotation=60, labelsize=8)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # beside the bars, never over them
    fig.tight_layout()
    return fig


def waterfall(title: str, steps: list[tuple[str, float]], total: tuple[str, float] | None,
              start: str = "00_baseline") -> plt.Figure:
    """Multiplicative waterfall on a log axis: from 1.0 (start), each step's ratio as a floating bar from
    the running product to the next (green gains, red losses, labelled x ratio), then the total as a bar
    from 1. Where the measured total differs from the product of the steps, the rest is drawn as its own
    step (the interactions), so the bars always compose to the total."""
    if total is not None:
        prod = math.prod(f for _, f in steps)
        if abs(total[1] / prod - 1.0) > 1e-9:
            steps = steps + [("rest (interactions)", total[1] / prod)]
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * (len(steps) + 2) + 2), 4.2))
    names = [start] + [n for n, _ in steps] + ([total[0]] if total else [])
    levels = [1.0]
    for _, f in steps:
        levels.append(levels[-1] * f)
    floor = 0.8 * min(levels + ([total[1]] if total else []))  # log scale: whole bars start here, not at 0
    ax.bar(0, 1.0 - floor, bottom=floor, color="#7f8c8d")
    for i, (_, f) in enumerate(steps, start=1):
        lo, hi = sorted(levels[i - 1:i + 1])
        ax.bar(i, hi - lo, bottom=lo, color="#27ae60" if f >= 1 else "#c0392b")
        ax.annotate(f"{f:.2f}x", (i, hi), xytext=(0, 2), textcoords="offset points", ha="center", va="bottom",
                    fontsize=7)
    if total:
        ax.bar(len(steps) + 1, total[1] - floor, bottom=floor, color="#2e86c1")
        ax.annotate(f"{total[1]:.2f}x", (len(steps) + 1, total[1]), xytext=(0, 2), textcoords="offset points",
                    ha="center", va="bottom", fontsize=8, fontweight="bold")
    ax.set_yscale("log")
    ax.set_ylim(floor, 1.3 * max(levels + ([total[1]] if total else [])))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}x" if str(v)[0] in "25" else ""))
    ax.set_xticks(range(len(names)), names, rotation=60, fontsize=8)
    ax.axhline(1.0, color="k", linewidth=0.6)
    ax.set_ylabel(f"speedup over {start} (log)")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def waterfall_charts(run: Run) -> dict[str, plt.Figure]:
    """A run's waterfalls: the ladder (each rung's factor over the rung it is measured against, to the top
    rung's total over the baseline); add-one (each variant's gain alone; their product, as if the gains
    composed); leave-one-out (what removing each variant costs, the rest that no single variant explains,
    to all variants together over the baseline)."""
    ok = _ok(run)
    if not ok:
        return {}
    base = ok[0]
    out = {}
    chain = [r for r in ok[1:] if r.kind in (None, "ladder") and run.previous(r) is not None]
    if chain:
        steps = [(r.name, run.ratio(r)) for r in chain]
        out["waterfall"] = waterfall(f"Ladder waterfall: {run.profile} on {run.device_name}", steps,
                                     (chain[-1].name + " (total)", run.vs_base(chain[-1])),
                                     base.name)
    adds = [r for r in ok if r.kind == "add_one"]
    if adds:
        steps = [(r.variant, run.ratio(r)) for r in adds]
        out["waterfall_add_one"] = waterfall("Add one: each variant's gain alone, composed as if independent",
                                             steps, ("product of the gains", math.prod(f for _, f in steps)),
                                             base.name)
    alls = [r for r in ok if r.kind == "all"]
    drops = [r for r in ok if r.kind == "drop_one" and run.previous(r) is not None]
    if alls and drops:
        steps = [(r.variant, 1 / run.ratio(r)) for r in drops]
        out["waterfall_leave_one_out"] = waterfall(
            "Leave one out: what removing each variant from all costs", steps,
            (alls[0].name + " (total)", alls[0].tokens_per_sec / base.tokens_per_sec), base.name)
    return out


def ablation_chart(runs: list[Run]) -> plt.Figure | None:
    """add_one: each variant's gain alone (tok/s ÷ baseline); leave_one_out: what removing it costs
    (tok/s with all ÷ tok/s without it)."""
    series = {}
    for run in runs:
        for r in _ok(run):
            against = run.previous(r)
            if against is None:
                continue
            if r.kind == "add_one":
                series.setdefault("alone (add one)", {})[r.variant] = run.ratio(r, against)
            elif r.kind == "drop_one":
                series.setdefault("removed (leave one out)", {})[r.variant] = 1 / run.ratio(r, against)
    if not series:
        return None
    names = sorted({n for s in series.values() for n in s})
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(names) + 2), 4))
    width = 0.8 / len(series)
    for k, (label, vals) in enumerate(series.items()):
        ax.bar([i + k * width for i in range(len(names))], [vals.get(n, 0.0) for n in names], width, label=label)
    ax.axhline(1.0, color="k", linewidth=0.8)
    ax.set_xticks([i + width * (len(series) - 1) / 2 for i in range(len(names))], names, rotation=60, fontsize=8)
    ax.set_ylabel("throughput ratio")
    ax.set_title("Ablations: each variant alone vs removed from the rest")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def generations_chart(runs: list[Run], normalised: bool) -> plt.Figure:
    """The same rungs side by side across runs (devices): absolute tok/s, or each run's speedup
    over its own baseline."""
    roles = rung_roles(runs)
    names = [label for _, label in roles]
    fig, ax = plt.subplots(figsize=(max(6, 0.8 * len(names) + 2), 4.5))
    width = 0.8 / len(runs)
    for k, run in enumerate(runs):
        base = run.rungs[0].tokens_per_sec if run.rungs and run.rungs[0].ok else None
        vals = []
        for n, _ in roles:
            r = run.rung_as(n)
            v = r.tokens_per_sec if r and r.ok else 0.0
            vals.append(v / base if normalised and base else v)
        ax.bar([i + k * width for i in range(len(names))], vals, width, label=run.label)
    ax.set_xticks([i + width * (len(runs) - 1) / 2 for i in range(len(names))], names, rotation=60, fontsize=8)
    ax.set_ylabel("speedup over own baseline" if normalised else "tokens / s")
    ax.set_title("Runs side by side" + (" (normalised)" if normalised else ""))
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
