"""The Generations section: the same rungs on several devices, each rung's ratio to a reference device (the
first run named), the devices' facts, and each ratio set against the devices' compute and bandwidth ratios —
so a user sees which rungs gain what the extra FLOPs give (compute-bound) and which only what the extra
bandwidth gives (memory-bound), or less than either (launch- or host-bound). Cost per million tokens from a
$/device-hour the user supplies (no built-in prices)."""

from __future__ import annotations

from .charts import GIB, fmt as _f
from .load import Run


def _peak(run: Run, key: str) -> float | None:
    return (run.device.get("datasheet") or {}).get(key)


def device_facts(runs: list[Run]) -> list[list[str]]:
    ref = runs[0]
    rows = [["run", "device", "memory GiB", "SMs / threads", "dense bf16 TFLOP/s", "TF32", "fp32", "memory GB/s",
             "bf16 ratio", "bandwidth ratio", "driver", "CUDA", "torch"]]
    for run in runs:
        d = run.device

        def ratio(key):
            a, b = _peak(run, key), _peak(ref, key)
            return f"{a / b:.2f}x" if a and b else "-"

        rows.append([run.path.name, d.get("name", "?"), f"{d.get('total_memory', 0) / GIB:.1f}",
                     str(d.get("sm_count", "?")),
                     *(_f(_peak(run, k)) for k in ("bf16_tflops", "tf32_tflops", "fp32_tflops", "memory_bandwidth_gbs")),
                     ratio("bf16_tflops"), ratio("memory_bandwidth_gbs"), d.get("driver_version") or "-",
                     d.get("runtime_version") or "-",
                     run.build.get("torch", run.context.get("torch_version", "?"))])
    return rows


def bound_by(ratio: float, compute: float | None, bandwidth: float | None) -> str:
    """What a rung's device ratio reads as against the devices' compute and bandwidth ratios."""
    if not compute or not bandwidth:
        return "-"
    lo = min(compute, bandwidth)
    # below both ratios (by over 5%), or less than half of the smaller one's gain
    if ratio < 0.95 * lo or (lo > 1.0 and ratio - 1.0 < 0.5 * (lo - 1.0)):
        return "launch/host-bound"
    return "compute-bound" if abs(ratio - compute) <= abs(ratio - bandwidth) else "memory-bound"


def generations_table(runs: list[Run]) -> list[list[str]]:
    """One line per rung: tok/s on each device, and each other device's ratio to the first, read against the
    devices' dense bf16 and bandwidth ratios."""
    ref, others = runs[0], runs[1:]
    names = []
    for run in runs:
        for r in run.rungs:
            if r.ok and r.name not in names:
                names.append(r.name)
    head = ["rung"] + [f"{run.device.get('name', '?')} tok/s" for run in runs]
    for run in others:
        head += [f"{run.device.get('name', '?')} / {ref.device.get('name', '?')}", "reads as"]
    rows = [head]
    for n in names:
        row = [n]
        for run in runs:
            r = run.rung(n)
            row.append(_f(r.tokens_per_sec) if r and r.ok else "-")
        base = ref.rung(n)
        for run in others:
            r = run.rung(n)
            if r and r.ok and base and base.ok and base.tokens_per_sec:
                ratio = r.tokens_per_sec / base.tokens_per_sec
                compute = _ratio(run, ref, "bf16_tflops" if _bf16(r) else "tf32_tflops" if "tf32" in r.variants else "fp32_tflops")
                row += [f"{ratio:.2f}x", bound_by(ratio, compute, _ratio(run, ref, "memory_bandwidth_gbs"))]
            else:
                row += ["-", "-"]
        rows.append(row)
    return rows


def _bf16(r) -> bool:
    return any(v in r.variants for v in ("bf16_cast", "bf16_autocast"))


def _ratio(run: Run, ref: Run, key: str) -> float | None:
    a, b = _peak(run, key), _peak(ref, key)
    return a / b if a and b else None


def cost_table(runs: list[Run], prices: dict[str, float]) -> list[list[str]] | None:
    """$ per million tokens at each run's fastest ok rung (an anti-variant's never: it is slowed on purpose, and
    its tok/s above another rung's is noise), from a $/device-hour per run directory name or device name
    (`--price NAME=USD`). None when no price applies."""
    rows = [["run", "device", "$ / device-hour", "fastest rung", "tok/s", "$ / 1M tokens"]]
    for run in runs:
        price = prices.get(run.path.name, prices.get(run.device.get("name", "")))
        ok = [r for r in run.rungs if r.ok and r.tokens_per_sec and not r.anti_variant]
        if price is None or not ok:
            continue
        best = max(ok, key=lambda r: r.tokens_per_sec)
        world = run.device.get("world_size", 1) or 1
        usd = price * world / 3600 / best.tokens_per_sec * 1e6
        rows.append([run.path.name, run.device.get("name", "?"), f"{price:.2f}" + (f" x {world}" if world > 1 else ""),
                     best.name, _f(best.tokens_per_sec), f"{usd:.3f}"])
    return rows if len(rows) > 1 else None


def notes(runs: list[Run]) -> list[str]:
    out = [f"ratios are to {runs[0].device.get('name', '?')} ({runs[0].path.name}), the first run named."]
    if any(_peak(r, "bf16_tflops") for r in runs):
        out.append("reads as: a rung whose ratio is nearest the devices' peak-FLOP ratio (in its precision) reads "
                   "as compute-bound, nearest their bandwidth ratio as memory-bound, and one 5% below both, or gaining "
                   "less than half of the smaller's gain, as launch/host-bound: a heuristic, not a measurement. Peaks and bandwidth are datasheet figures "
                   "(bench/runtime/datasheet.cpp).")
    else:
        out.append("no datasheet for these devices (CPUs, unknown GPUs): no compute or bandwidth ratio to read the "
                   "rungs' ratios against.")
    return out
