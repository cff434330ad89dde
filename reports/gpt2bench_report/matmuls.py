"""kernels.json's matmuls, each alone: the step's at ATen's at::mm against cuBLASLt's heuristic algorithms
(`gemms`), and the blocks' in FP8 as fp8_linear runs them against ATen's (`fp8_gemms`)."""

from __future__ import annotations

from .charts import fmt as _fmt
from .load import Run
from .notes import _first_line

_PARTIAL_KERNELS = ("kernels.json is partial: gpt2bench kernels was stopped (a deadline, a crash) after what is "
                    "listed; the rest was not timed.")


def gemm_section(run: Run) -> tuple[str, list[list[str]], list[str]] | None:
    """kernels.json's `gemms` as (title, table, notes): each of the step's matmuls, ATen's at::mm against the
    fastest of cuBLASLt's heuristic algorithms, and what ATen's picks cost the step; None where there is none."""
    gemms = (run.kernels or {}).get("gemms")
    if not isinstance(gemms, list) or not gemms:
        return None
    rows = [["matmul", "M x N x K", "a step", "ATen ms", "ATen TFLOP/s", "heuristic's first", "fastest",
             "fastest TFLOP/s", "ATen / fastest"]]
    aten_ms = best_ms = 0.0
    for g in gemms:
        if "error" in g:
            rows.append([g["name"], "-", "-", "-", "-", "-", f"error: {_first_line(g['error'])}", "-", "-"])
            continue
        times = [s["median_ms"] for s in g["sides"]]
        best = min(range(1, len(times)), key=times.__getitem__, default=0)
        aten_ms += g["calls"] * times[0]
        best_ms += g["calls"] * min(times)
        rows.append([g["name"], f"{g['M']} x {g['N']} x {g['K']}", str(g["calls"]), _fmt(times[0], ".4f"),
                     _fmt(g["tflops"][0], ".0f"), _fmt(g["tflops"][1], ".0f") if len(times) > 1 else "-",
                     f"#{best - 1}" if best else "-", _fmt(g["tflops"][best], ".0f"),
                     f"{times[0] / times[best]:.2f}x" if best else "-"])
    notes = ["Each matmul alone, timed as kernels.json's cases are; #N: its place in cuBLASLt's heuristic list "
             "(#0 is what cuBLASLt itself would pick); ATen / fastest > 1: an algorithm ATen did not pick is faster.",
             f"The step's matmuls as ATen runs them: {aten_ms:.2f} ms a step; each at its fastest algorithm: "
             f"{best_ms:.2f} ms ({aten_ms - best_ms:.2f} ms, {100 * (1 - best_ms / aten_ms):.1f}% less)."]
    notes += [f"{g['name']}: {_first_line(f)}" for g in gemms for f in g.get("failed", [])]
    if run.kernels.get("complete") is False:
        notes.append(_PARTIAL_KERNELS + " The sums above cover the matmuls listed.")
    return "The step's matmuls against cuBLASLt's heuristic algorithms (kernels.json: gemms)", rows, notes


def _timed(run: Run, key: str) -> list[dict]:
    """kernels.json's list under `key`, the matmuls that were timed (not skipped, not failed)."""
    gemms = (run.kernels or {}).get(key)
    return [g for g in gemms if "sides" in g] if isinstance(gemms, list) else []


def fp8_matmul_ms(run: Run) -> tuple[float, float, float] | None:
    """The blocks' matmuls a step (kernels.json: fp8_gemms, at its batch): ATen's in the step's dtype, FP8's as
    fp8_linear runs them, and FP8's at each's faster accumulation, in ms; None where none was timed."""
    gemms = _timed(run, "fp8_gemms")
    if not gemms:
        return None
    ms = [[s["median_ms"] for s in g["sides"]] for g in gemms]
    as_run = [g.get("as_run", 1) for g in gemms]
    return (sum(g["calls"] * t[0] for g, t in zip(gemms, ms)),
            sum(g["calls"] * t[i] for g, t, i in zip(gemms, ms, as_run)),
            sum(g["calls"] * min(t[1:]) for g, t in zip(gemms, ms)))


def fp8_gemm_section(run: Run) -> tuple[str, list[list[str]], list[str]] | None:
    """kernels.json's `fp8_gemms` as (title, table, notes): each of the blocks' matmuls in FP8 (operands quantized
    beforehand) as fp8_linear runs it and with the other accumulation, against ATen's; None where none ran."""
    gemms = (run.kernels or {}).get("fp8_gemms")
    if not isinstance(gemms, list) or not gemms:
        return None
    rows = [["matmul", "M x N x K", "a step", "ATen ms", "FP8 ms (as run)", "FP8 TFLOP/s", "other accumulation ms",
             "ATen / FP8"]]
    for g in gemms:
        if "sides" not in g:
            rows.append([g["name"], "-", "-", "-", f"error: {_first_line(g.get('error', '?'))}", "-", "-", "-"])
            continue
        t, i = [s["median_ms"] for s in g["sides"]], g.get("as_run", 1)
        rows.append([g["name"], f"{g['M']} x {g['N']} x {g['K']}", str(g["calls"]), _fmt(t[0], ".4f"),
                     _fmt(t[i], ".4f"), _fmt(g["tflops"][i], ".0f"), _fmt(t[3 - i], ".4f"), f"{t[0] / t[i]:.2f}x"])
    notes = ["Each matmul alone: _scaled_mm on operands quantized beforehand (their scaling is the fp8_linears "
             "quantization case's, above), with the formats and accumulation fp8_linear uses for that product "
             "(kernels/fp8_linear.h), and with the other accumulation; ATen's at::mm in the step's dtype beside it."]
    if sums := fp8_matmul_ms(run):
        aten, fp8, best = sums
        notes.append(f"The blocks' matmuls a step: {aten:.2f} ms as ATen runs them, {fp8:.2f} ms in FP8 as "
                     f"fp8_linear runs them ({aten / fp8:.2f}x), {best:.2f} ms at each one's faster accumulation.")
        worst = max(d for g in _timed(run, "fp8_gemms") for d in g.get("max_rel_diff", [0.0]))
        notes.append(f"FP8's products differ from ATen's by up to {worst:.1e} of their largest element (the operands "
                     "rounded to e4m3 and e5m2).")
    if run.kernels.get("complete") is False:
        notes.append(_PARTIAL_KERNELS + " The sums above cover the matmuls listed.")
    return "The blocks' matmuls in FP8 against ATen's (kernels.json: fp8_gemms)", rows, notes
