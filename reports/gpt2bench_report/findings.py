"""A run's answer in five to nine lines, read first: how fast, what paid, against torch.compile and eager, what
was kept, what failed, was skipped or throttled, and whether the run's checks of its own figures pass."""

from __future__ import annotations

from .charts import GIB, fmt
from .checks import checks_words
from .load import Run, Rung
from .matmuls import fp8_matmul_ms
from .stats import against_previous, paired_word


def fastest(run: Run) -> Rung | None:
    """The run's fastest rung that computes the same step: ok, not slowed on purpose, not a rung timed again (a
    control), parity not failed."""
    ok = [r for r in run.rungs if r.ok and not r.anti_variant and r.kind != "control" and r.parity_verdict != "fail"
          and r.tokens_per_sec]
    return max(ok, key=lambda r: r.tokens_per_sec, default=None)


def _mfu(run: Run, r: Rung) -> str:
    if r.mfu is None:
        return "no MFU (no peak for this device)"
    return "MFU not shown (its peak is unreliable)" if run.mfu_unreliable else f"MFU {100 * r.mfu:.1f}%"


def _rate(flops_per_s: float) -> str:
    return f"{flops_per_s / 1e12:.0f} TFLOP/s" if flops_per_s >= 1e12 else f"{flops_per_s / 1e9:.0f} GFLOP/s"


def _where_the_time_goes(run: Run, r: Rung) -> str:
    """The rung's step by kind of work from its breakdown: the two largest kinds' shares, the matmuls' rate (their
    counted FLOPs over their device time) against the GEMM rate the run measured, the rest together; and the MFU
    the matmuls and attention allow at their rates (the rung's over their share: all else taking no time)."""
    b = r.profile or {}
    kinds, flops = b.get("category_ms") or {}, b.get("counted_flops_by_op") or {}
    total = sum(kinds.values())
    if not total:
        return ""
    # the matmul kind's ops: the attention kernels' FLOPs and bmm's (attention's own, in the unfused step) apart
    mm = sum(v for k, v in flops.items() if "attention" not in k and "bmm" not in k)
    top = sorted(kinds, key=lambda k: -kinds[k])[:2]
    shares = {k: round(100 * kinds[k] / total) for k in top}
    parts = []
    for k in top:
        part = f"{k} {shares[k]}%"
        if k == "matmul" and mm and kinds[k]:
            rate = mm / (kinds[k] / 1e3)
            part += f" at {_rate(rate)}"
            if r.measured_matmul:
                part += f" ({rate / r.measured_matmul:.2f}x the {r.precision} GEMM the run measured)"
        parts.append(part)
    core = kinds.get("matmul", 0.0) + kinds.get("attention", 0.0)
    ceiling = (f"; the matmuls and attention alone at these rates: MFU {100 * r.mfu * total / core:.1f}%"
               if core and r.mfu is not None and not run.mfu_unreliable else "")
    return f"; its breakdown's device time: {', '.join(parts)}, the rest {100 - sum(shares.values())}%{ceiling}"


def _steps(run: Run) -> tuple[list[tuple[float, Rung]], list[tuple[float, Rung]]]:
    """Each rung's factor over the rung it is measured against, where the difference is real: gains, losses."""
    gains, losses = [], []
    for r in run.rungs:
        prev, verdict = run.previous(r), None
        if r.ok and prev and r.kind != "control" and (verdict := against_previous(run, r)) and verdict[0] == "real":
            x = run.ratio(r, prev)
            (gains if x > 1 else losses).append((x, r))
    return sorted(gains, key=lambda g: -g[0]), sorted(losses, key=lambda g: g[0])


def _against_references(run: Run) -> list[str]:
    out = []
    for ref in run.references:
        name, batch = ref.get("name", "?"), (ref.get("config") or {}).get("batch", "?")
        if "ratio" in ref:
            ri = ref.get("ratio_interval") or {}
            span = f" ({ri['low']:.2f}-{ri['high']:.2f}x{paired_word(ri)})" if ri else ""
            # the fastest rung it is not held against, where one is faster (another matmul format, failed parity)
            passed = max(ref.get("passed_over", []), key=lambda p: p.get("cpp_tokens_per_sec", 0), default=None)
            not_ = f" (not {passed.get('rung', '?')}: {passed.get('why', '?')})" if passed else ""
            out.append(f"{ref.get('compared_with', '?')} {ref['ratio']:.2f}x{span} {name} at B={batch}{not_}")
        elif ref.get("status") != "ok":
            out.append(f"{name} at B={batch}: {ref.get('status', '?')}")
    return out


def by_kind(ref: dict) -> list[tuple[str, float, float]]:
    """A reference beside its C++ rung by kind of work (rungs.json's `category_ms`): (kind, C++ ms, Python ms) a step,
    the largest difference first; none where either side ran no breakdown."""
    kinds = ref.get("category_ms") or {}
    cpp, py = kinds.get("cpp") or {}, kinds.get("python") or {}
    if not cpp or not py:
        return []
    rows = [(k, cpp.get(k, 0.0), py.get(k, 0.0)) for k in set(cpp) | set(py)]
    return sorted(rows, key=lambda r: (-abs(r[2] - r[1]), r[0]))


def _against_compile_by_kind(run: Run) -> str:
    """Where the step's time differs most from torch.compile's: its three largest differences a batch."""
    parts = []
    for ref in run.references:
        if ref.get("name") == "ref_torch_compile" and (kinds := by_kind(ref)):
            parts.append(f"{ref.get('compared_with', '?')} at B={(ref.get('config') or {}).get('batch', '?')}: "
                         + ", ".join(f"{k} {c:.2f} vs {p:.2f} ms" for k, c, p in kinds[:3]))
    return ("**Against torch.compile, by kind of work** (C++ vs Python, a step): " + "; ".join(parts) + ".") if parts \
        else ""


def _fp8(run: Run) -> str:
    """A GPU run's FP8 rung against the rung it is built on (the bf16 top): its ratio, parity and memory, and where
    its step's time moved by the two breakdowns (matmuls, FP8's own scaling and layouts, the largest other change)."""
    r = next((r for r in run.rungs if run.variant_parity(r) == "fp8"), None)
    if r is None or run.device.get("type") != "cuda":
        return ""
    if not r.ok:
        why = r.error or next((s.get("reason", "") for s in r.skipped if s.get("variant") == r.variant), "")
        return f"**FP8**: {r.name} {r.status}: {why.splitlines()[0] if why else '(rungs.json says nothing more)'}."
    top = run.previous(r)
    if top is None:
        return f"**FP8**: {r.name} {fmt(r.tokens_per_sec)} tok/s; the rung it is built on did not run."
    verdict = against_previous(run, r)
    line = (f"**FP8**: {r.name} {run.ratio(r, top):.2f}x {top.name} at B={r.batch} "
            f"({verdict[0] if verdict else '?'}), parity {r.parity_verdict}")
    if r.peak_alloc_bytes and top.peak_alloc_bytes:
        line += f", peak memory {r.peak_alloc_bytes / top.peak_alloc_bytes:.2f}x"
    mine, theirs = ((x.profile or {}).get("category_ms") or {} for x in (r, top))
    if mine and theirs:
        moved = {c: mine.get(c, 0.0) - theirs.get(c, 0.0) for c in set(mine) | set(theirs)}
        rest = max((c for c in moved if c not in ("matmul", "fp8_scaling")), key=lambda c: abs(moved[c]), default=None)
        line += f"; a step's matmuls {theirs.get('matmul', 0.0):.1f} -> {mine.get('matmul', 0.0):.1f} ms"
        if "fp8_scaling" in mine:  # its quantizations and layouts (a breakdown before 2026-12-02 has them elsewhere)
            line += f", its scaling and layouts {mine['fp8_scaling']:.1f} ms"
        if rest:
            line += f", its {rest} {moved[rest]:+.1f} ms (the largest other change)"
    else:
        line += f"; no breakdown of {(top if mine else r).name} to say where the time went"
    return line + _fp8_op(run) + _fp8_matmuls(run) + "."


def _fp8_op(run: Run) -> str:
    """kernels.json's FP8 case: its pass against the first thing it replaces (the top rung's), op by op."""
    case = next((c for c in (run.kernels or {}).get("cases", []) if c.get("variant") == "fp8_linears"
                 and c.get("speedup") and c.get("sides")), None)
    if case is None:
        return ""
    ours, x = case["sides"][0], case["speedup"][0]
    theirs = next((s for s in case["sides"] if s.get("name") == x.get("over")), None)
    if theirs is None:
        return ""
    return (f"; op by op (kernels.json, {case.get('shape', '?')}): {ours['name'].split(': ', 1)[-1]} "
            f"{ours['median_ms']:.3f} ms, {x['ratio']:.2f}x {theirs['name'].split(':')[0]} {theirs['median_ms']:.3f} ms")


def _fp8_matmuls(run: Run) -> str:
    """kernels.json's fp8_gemms: the blocks' matmuls alone a step, in FP8 as fp8_linear runs them and in bf16."""
    if (sums := fp8_matmul_ms(run)) is None:
        return ""
    aten, fp8, _ = sums
    return (f"; its matmuls alone {fp8:.2f} ms a step against ATen's {aten:.2f} (kernels.json: fp8_gemms, "
            f"B={(run.kernels.get('profile') or {}).get('batch', '?')})")


def findings(run: Run) -> list[str]:
    """Five to nine lines: each a finding with its figure."""
    base, best = (run.rungs[0] if run.rungs and run.rungs[0].ok else None), fastest(run)
    lines = []
    if moved := [r for r in run.rungs if r.disturbed]:
        busy = [r.paired["core_share"] for r in moved if r.paired.get("busy")]
        how = (f"other work taking its cores (the run got {100 * min(busy):.0f}% of them)" if busy
               else "more than the difference measured")
        lines.append(f"**Disturbed**: the machine's speed moved up to {max(r.paired['movement'] for r in moved):.2f}x "
                     f"while {', '.join(r.name for r in moved[:4])}{' …' if len(moved) > 4 else ''} "
                     f"{'were' if len(moved) > 1 else 'was'} timed, {how}: "
                     f"{'their ratios are' if len(moved) > 1 else 'its ratio is'} not claimed.")
    if best and base:
        lines.append(f"**Fastest**: {best.name} (B={best.batch}), {fmt(best.tokens_per_sec)} tok/s, "
                     f"{run.vs_base(best):.2f}x the baseline's {fmt(base.tokens_per_sec)}; "
                     f"{_mfu(run, best)}{_where_the_time_goes(run, best)}.")
    elif best:
        lines.append(f"**Fastest**: {best.name}, {fmt(best.tokens_per_sec)} tok/s (no baseline ran); {_mfu(run, best)}"
                     f"{_where_the_time_goes(run, best)}.")
    else:
        lines.append("**Fastest**: no rung ran to the end.")
    gains, losses = _steps(run)
    lines.append("**Largest gains**: " + (", ".join(f"{r.name} {x:.2f}x" for x, r in gains[:3]) or "none beyond noise")
                 + " (each over the rung it is measured against).")
    lines.append("**Slower**: " + (", ".join(f"{r.name} {x:.2f}x" for x, r in losses) or "no rung, beyond noise") + ".")
    if best and base and best.peak_alloc_bytes and base.peak_alloc_bytes:
        lines.append(f"**Memory**: {best.name} peaks at {best.peak_alloc_bytes / GIB:.2f} GiB allocated at batch "
                     f"{best.batch}, the baseline {base.peak_alloc_bytes / GIB:.2f} GiB at {base.batch}.")
    if refs := _against_references(run):
        lines.append("**Against Python PyTorch**: " + "; ".join(refs) + ".")
    if kinds_line := _against_compile_by_kind(run):
        lines.append(kinds_line)
    kept = sorted({e.get("variant", "?") for r in run.rungs if r.ok and r.kept for e in r.kept
                   if e.get("kept") and not e.get("tie")})
    if any(r.kind == "kept" for r in run.rungs):
        lines.append("**Kept**: " + (", ".join(kept) if kept else "no extra beat the top") + _ties(run) + ".")
    if fp8 := _fp8(run):
        lines.append(fp8)
    if failed := [_parity_failed(r) for r in run.rungs if r.ok and r.parity_verdict == "fail"]:
        lines.append("**Parity failed** (docs/measurement.md: Parity): " + "; ".join(failed) + ".")
    for status in ("error", "oom", "diverged", "interrupted"):
        if named := [r.name for r in run.rungs if r.status == status]:
            lines.append(f"**{status.capitalize()}**: {', '.join(named)} (the table says why).")
    if skipped := [r.name for r in run.rungs if r.status == "skipped"]:
        lines.append(f"**Skipped**: {len(skipped)} rung(s) this device cannot run or that had nothing to add: "
                     f"{', '.join(skipped[:4])}{' …' if len(skipped) > 4 else ''}.")
    if throttled := [r.name for r in run.rungs if r.throttled]:
        lines.append(f"**Throttled**: {', '.join(throttled)}.")
    if len(lines) > 8 and kinds_line:  # the first to go where the lines are too many: what failed is said
        lines.remove(kinds_line)
    ok = sum(r.ok for r in run.rungs)
    own = checks_words(run)
    return lines[:8] + [f"**Run**: {run.status}; {ok} of {len(run.rungs)} rungs ran to the end{'; ' * bool(own)}{own}."]


def _parity_failed(r: Rung) -> str:
    """What a rung that failed parity was judged against, and how far off it was: losses, gradient, parameter."""
    worst = f", {r.parity_worst[0]} {r.parity_worst[1]:.2f}x" if r.parity_worst else ""
    grad = f", first gradient {r.parity_grad_ratio:.3f}x" if r.parity_grad_ratio else ""
    against = ("the " if r.parity_against.startswith("baseline") else "") + r.parity_against
    return f"{r.name} against {against}: losses within {r.parity_dev:.3g}{grad}{worst}"


def _ties(run: Run) -> str:
    """'; with the ties (a, b) at batch 8: 1.02x' — what the extras that tied the top gave at the profile's batch."""
    for r in run.rungs:
        tied = [e.get("variant", "?") for e in (r.kept or []) if e.get("kept") and e.get("tie")]
        if r.ties and r.ok and tied and (before := run.previous(r)) and before.tokens_per_sec:
            return (f"; with the ties ({', '.join(tied)}) at batch {r.batch}: {run.ratio(r, before):.2f}x "
                    f"{before.name}")
    return ""


HEADLINE = ["device", "run", "baseline tok/s", "fastest rung (batch)", "tok/s", "x baseline", "MFU",
            "vs ref_torch_compile (batch)"]


def headline(run: Run) -> list[str]:
    """The README's row for a run: baseline to fastest, the x, MFU, and each ratio against torch.compile."""
    base, best = run.rungs[0], fastest(run)
    compile_ = [f"{x['ratio']:.2f}x ({x['ratio_interval']['low']:.2f}-{x['ratio_interval']['high']:.2f}x) at "
                f"{x['config']['batch']}" for x in run.references
                if x.get("name") == "ref_torch_compile" and "ratio" in x]
    mfu = "?" if run.mfu_unreliable else "-" if best.mfu is None else f"{100 * best.mfu:.1f}%"
    return [run.device_name, f"`{run.path.parent.name}/{run.path.name}`", fmt(base.tokens_per_sec),
            f"{best.name} ({best.batch})", fmt(best.tokens_per_sec),
            f"{run.vs_base(best):.2f}x", mfu, "; ".join(compile_) or "-"]  # as Findings and the console say it
