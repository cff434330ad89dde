"""The Generations section: the same rungs on several devices, each rung's ratio to a reference device (the
first run named), the devices' facts, and each ratio set against the devices' compute and bandwidth ratios —
so a user sees which rungs gain what the extra FLOPs give (compute-bound) and which only what the extra
bandwidth gives (memory-bound), or less than either (launch- or host-bound). Cost per million tokens from a
$/device-hour the user supplies (no built-in prices)."""

from __future__ import annotations

import math

from .charts import GIB, fmt as _f
from .load import Run, rung_roles


def basis(runs: list[Run]) -> str:
    """The one basis every run's peaks are read on, so that their ratios compare: "datasheet" where each run's
    device has a datasheet row (bench/runtime/datasheet.cpp: the GPUs the project knows), else "measured" (what
    each run measured itself: CPUs, unknown GPUs, a mix of both)."""
    return "datasheet" if all(r.device.get("datasheet") for r in runs) else "measured"


_PRECISION = {"bf16_tflops": "bf16", "fp16_tflops": "fp16", "tf32_tflops": "tf32", "fp32_tflops": "fp32"}


def _precision(run: Run, r) -> str:
    """The datasheet key of the precision a rung's matmuls run in (rungs.json's, or its spec's for an older run)."""
    return r.precision + "_tflops"


def _peak(run: Run, key: str, on: str) -> float | None:
    """A device's peak (TFLOP/s in a precision, or memory GB/s) on the basis `on`. Measured: rungs.json's
    "measured", else (a run older than it) the matmul rate its rungs of that precision carry."""
    if on == "datasheet":
        return (run.device.get("datasheet") or {}).get(key)
    if key == "memory_bandwidth_gbs":
        return run.measured.get("copy_bandwidth_gbs")
    if (v := (run.measured.get("matmul_tflops") or {}).get(_PRECISION[key])) is not None:
        return v
    return next((r.measured_matmul / 1e12 for r in run.rungs
                 if r.measured_matmul and r.status != "skipped" and _precision(run, r) == key), None)


def device_facts(runs: list[Run]) -> list[list[str]]:
    ref, on = runs[0], basis(runs)
    rows = [["run", "device", "memory GiB", "SMs / threads", "peaks", "dense bf16 TFLOP/s", "TF32", "fp32",
             "memory GB/s", "bf16 ratio", "bandwidth ratio", "driver", "CUDA", "torch"]]
    for run in runs:
        d = run.device

        def ratio(key):
            x = _ratio(run, ref, key, on)
            return times(x) if x else "-"

        rows.append([run.path.name, run.device_name, f"{d.get('total_memory', 0) / GIB:.1f}",
                     str(d.get("sm_count", "?")),
                     f"datasheet ({d['datasheet'].get('model', '?')})" if on == "datasheet" else "measured",
                     *(_f(v, ",.0f" if v >= 100 else ".3g") if (v := _peak(run, k, on)) is not None else "-" for k in ("bf16_tflops", "tf32_tflops", "fp32_tflops", "memory_bandwidth_gbs")),
                     ratio("bf16_tflops"), ratio("memory_bandwidth_gbs"), d.get("driver_version") or "-",
                     d.get("runtime_version") or "-",
                     run.build.get("torch", run.context.get("torch_version", "?"))])
    return rows


def times(x: float) -> str:
    """A ratio as "1.23x", and under 0.01 with its two significant digits ("0.00054x": an emulated bf16 matmul
    beside a native one was "0.00x")."""
    return f"{x:.2f}x" if x >= 0.01 else f"{x:.2g}x"


def bound_by(ratio: float, compute: float | None, bandwidth: float | None) -> str:
    """What a rung's device ratio reads as against the devices' compute and bandwidth ratios."""
    if not compute or not bandwidth:
        return "-"
    lo = min(compute, bandwidth)
    # below both ratios (by over 5%), or less than half of the smaller one's gain
    if ratio < 0.95 * lo or (lo > 1.0 and ratio - 1.0 < 0.5 * (lo - 1.0)):
        return "launch/host-bound"
    # nearest in factors, not differences (0.013x is 24x off 0.00054x and 52x off 0.68x); more than 2x off
    # both, neither explains it (an emulated-bf16 CPU's step beside one with bf16 matmuls)
    off_compute, off_bandwidth = abs(math.log(ratio / compute)), abs(math.log(ratio / bandwidth))
    if min(off_compute, off_bandwidth) > math.log(2):
        return "neither (2x+ off both)"
    return "compute-bound" if off_compute <= off_bandwidth else "memory-bound"


def _compute_ratio(run: Run, ref: Run, r, base, on: str) -> float | None:
    """The devices' peak-FLOP ratio in the rung's precision: the datasheets', or the matmul rates the two runs
    measured for this rung's precision."""
    if on == "measured":
        return r.measured_matmul / base.measured_matmul if r.measured_matmul and base.measured_matmul else None
    a, b = _peak(run, _precision(run, r), on), _peak(ref, _precision(ref, base), on)
    return a / b if a and b else None


def generations_table(runs: list[Run]) -> list[list[str]]:
    """One line per rung: tok/s on each device, and each other device's ratio to the first, beside the devices'
    peak-FLOP (in the rung's precision) and bandwidth ratios, and what it reads as against them."""
    ref, others, on = runs[0], runs[1:], basis(runs)
    roles = rung_roles(runs)
    head = ["rung"] + [f"{run.device_name} tok/s" for run in runs]
    for run in others:
        head += [f"{run.device_name} / {ref.device_name}", "FLOPs, bandwidth ratios", "reads as"]
    rows = [head]
    for n, label in roles:
        row = [label]
        for run in runs:
            r = run.rung_as(n)
            row.append(_f(r.tokens_per_sec) if r and r.ok else "-")
        base = ref.rung_as(n)
        for run in others:
            r = run.rung_as(n)
            if r and r.ok and base and base.ok and base.tokens_per_sec:
                ratio = r.tokens_per_sec / base.tokens_per_sec
                compute = _compute_ratio(run, ref, r, base, on)
                bandwidth = _ratio(run, ref, "memory_bandwidth_gbs", on)
                peaks = ", ".join(times(x) if x else "-" for x in (compute, bandwidth))
                row += [times(ratio), peaks, bound_by(ratio, compute, bandwidth)]
            else:
                row += ["-", "-", "-"]
        rows.append(row)
    return rows


def _ratio(run: Run, ref: Run, key: str, on: str) -> float | None:
    a, b = _peak(run, key, on), _peak(ref, key, on)
    return a / b if a and b else None


def cost_table(runs: list[Run], prices: dict[str, float]) -> list[list[str]] | None:
    """$ per million tokens at each run's fastest ok rung (an anti-variant's never: it is slowed on purpose, and
    its tok/s above another rung's is noise; nor one that failed parity: it trains something else), from a
    $/device-hour per run directory name or device name (`--price NAME=USD`). None when no price applies."""
    rows = [["run", "device", "$ / device-hour", "fastest rung", "tok/s", "$ / 1M tokens"]]
    for run in runs:
        price = prices.get(run.path.name, prices.get(run.device_name, prices.get(run.device.get("name", ""))))
        ok = [r for r in run.rungs if r.ok and r.tokens_per_sec and not r.anti_variant and r.parity_verdict != "fail"]
        if price is None or not ok:
            continue
        best = max(ok, key=lambda r: r.tokens_per_sec)
        world = run.device.get("world_size", 1) or 1
        usd = price * world / 3600 / best.tokens_per_sec * 1e6
        rows.append([run.path.name, run.device_name, f"{price:.2f}" + (f" x {world}" if world > 1 else ""),
                     best.name, _f(best.tokens_per_sec), f"{usd:.3f}"])
    return rows if len(rows) > 1 else None


def notes(runs: list[Run]) -> list[str]:
    out = [f"ratios are to {runs[0].device_name} ({runs[0].path.name}), the first run named."]
    heuristic = ("reads as: a rung whose ratio is nearest the devices' peak-FLOP ratio (in its precision) reads as "
                 "compute-bound, nearest their bandwidth ratio as memory-bound, and one 5% below both, or gaining less "
                 "than half of the smaller's gain, as launch/host-bound, one more than 2x off both as neither (nearest "
                 "in factors): a heuristic, not a measurement.")
    if basis(runs) == "datasheet":
        out.append(heuristic + " Peaks and bandwidth are datasheet figures (bench/runtime/datasheet.cpp).")
        return out
    out.append(heuristic + " Peaks and bandwidth are what each run measured (not every device here has a datasheet): "
               "the best square GEMM in the rung's precision (n = 1024 on a CPU, 8192 on a GPU) and the best 256 MiB "
               "copy (bytes read + written), the same method on each device, on the threads the run had (a VM's "
               "share, not the whole chip's).")
    if missing := [r.path.name for r in runs if not r.measured.get("copy_bandwidth_gbs")]:
        out.append(f"no copy bandwidth measured in {', '.join(missing)} (a run older than that measurement): no "
                   "bandwidth ratio, so no 'reads as', against it.")
    for r in runs:
        if r.unreliable_peaks:
            out.append(f"UNRELIABLE peaks in {r.path.name} ({', '.join(sorted(r.unreliable_peaks))}): measured below a "
                       "rate a rung achieved (a busy machine?); ratios over them are not facts.")
    return out
