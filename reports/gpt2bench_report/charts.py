"""The report's charts, as matplotlib Figures (tests read their data from the figure objects)."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .load import Run  # noqa: E402
from .stats import differs  # noqa: E402

GIB = float(2**30)  # memory is shown in GiB: an "80 GB" H100 holds 79.2 GiB (85.0e9 bytes)


def fmt(v, spec=",.0f") -> str:
    """A number for a table cell ("-" for none); the report's tables share it."""
    return "-" if v is None else format(v, spec)

PUBLISHED = json.loads((Path(__file__).with_name("published.json")).read_text())
PHASES = ["data", "forward", "loss", "backward", "optimizer"]


def _ok(run: Run):
    return [r for r in run.rungs if r.ok]


def ladder_chart(run: Run) -> plt.Figure:
    """tok/s per rung (bars), speedup over the previous rung and the baseline (labels), parity marks,
    noise marks, and the published seed-000 speedups on a second axis, labelled as published."""
    rungs = _ok(run)
    fig, ax = plt.subplots(figsize=(max(6, 0.75 * len(rungs) + 2), 4.8))
    names = [r.name for r in rungs]
    tps = [r.tokens_per_sec for r in rungs]
    bars = ax.bar(names, tps, color=["#c0392b" if r.parity_verdict == "fail" else "#2e86c1" for r in rungs],
                  label="measured tok/s")
    base = tps[0] if tps else 1.0
    for bar, r in zip(bars, rungs):
        prev = run.previous(r)
        label = f"{r.tokens_per_sec / base:.2f}x base"
        if prev:
            real, _ = differs(prev.rep_tokens_per_sec, r.rep_tokens_per_sec)
            label = f"{r.tokens_per_sec / prev.tokens_per_sec:.2f}x prev" + ("" if real else " (noise)") + "\n" + label
        mark = {"pass": " ✓", "fail": " ✗ parity"}.get(r.parity_verdict, "")
        ax.annotate(label + mark, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center",
                    va="bottom", fontsize=6)
    ax.set_ylabel("tokens / s (measured)")
    ax.set_title(f"Ladder: {run.profile} on {run.device.get('name', '?')}")
    ax.tick_params(axis="x", rotation=60, labelsize=8)
    # Published seed-000 A100 speedups over its baseline, for the rungs this run reproduces.
    pub = {p["rung"]: p["tokens_per_sec"] for p in PUBLISHED["seed000_a100"]["rungs"]}
    xs, ys = [], []
    for i, r in enumerate(rungs):
        if r.published_rung in pub:
            xs.append(i)
            ys.append(pub[r.published_rung] / pub[0])
    if xs:
        ax2 = ax.twinx()
        ax2.plot(xs, ys, "k--o", markersize=4, label="published speedup (seed 000, 1x A100)")
        ax2.plot(range(len(rungs)), [t / base for t in tps], "-", color="#2e86c1", alpha=0.5,
                 label="measured speedup")
        ax2.set_ylabel("speedup over the baseline")
        ax2.legend(loc="upper left", fontsize=7)
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
    rungs = [r for r in _ok(run) if r.profile]
    if not rungs:
        return None
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(rungs) + 2), 4))
    bottom = [0.0] * len(rungs)
    for phase in PHASES:
        vals = [r.profile.get("phase_ms", {}).get(phase, 0.0) for r in rungs]
        ax.bar([r.name for r in rungs], vals, bottom=bottom, label=phase)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_ylabel("ms per step (profiling pass)")
    ax.set_title("Where a step's time goes")
    ax.tick_params(axis="x", rotation=60, labelsize=8)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


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
                series.setdefault("alone (add one)", {})[r.variant] = r.tokens_per_sec / against.tokens_per_sec
            elif r.kind == "drop_one":
                series.setdefault("removed (leave one out)", {})[r.variant] = against.tokens_per_sec / r.tokens_per_sec
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
    names = []
    for run in runs:
        for r in _ok(run):
            if r.name not in names:
                names.append(r.name)
    fig, ax = plt.subplots(figsize=(max(6, 0.8 * len(names) + 2), 4.5))
    width = 0.8 / len(runs)
    for k, run in enumerate(runs):
        base = run.rungs[0].tokens_per_sec if run.rungs and run.rungs[0].ok else None
        vals = []
        for n in names:
            r = run.rung(n)
            v = r.tokens_per_sec if r and r.ok else 0.0
            vals.append(v / base if normalised and base else v)
        ax.bar([i + k * width for i in range(len(names))], vals, width, label=run.label)
    ax.set_xticks([i + width * (len(runs) - 1) / 2 for i in range(len(names))], names, rotation=60, fontsize=8)
    ax.set_ylabel("speedup over own baseline" if normalised else "tokens / s")
    ax.set_title("Runs side by side" + (" (normalised)" if normalised else ""))
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
