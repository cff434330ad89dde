"""Is a difference between two rungs real or noise? Mann-Whitney U (as Google Benchmark's compare.py)."""

from __future__ import annotations

from functools import lru_cache
from math import comb, log

ALPHA = 0.05
MIN_REPS_FOR_U = 4  # below this the U test cannot reach p < 0.05; ranges are compared instead


def paired_word(ri: dict) -> str:
    """", paired" for a reference's ratio interval from paired timing (docs/reference-rungs.md), else ""."""
    return ", paired" if ri.get("method", "").startswith("paired") else ""


def mann_whitney_p(a: list[float], b: list[float]) -> float:
    """Exact two-sided p-value of the Mann-Whitney U test (no ties assumed; small samples)."""
    n, m = len(a), len(b)
    u = sum(1.0 if x > y else 0.5 if x == y else 0.0 for x in a for y in b)
    u_min = min(u, n * m - u)
    counts = _u_distribution(n, m)
    total = comb(n + m, n)
    p = sum(c for k, c in enumerate(counts) if k <= u_min) / total
    return min(1.0, 2 * p)


@lru_cache(maxsize=None)
def _u_distribution(n: int, m: int) -> tuple[int, ...]:
    """Number of orderings of n a's and m b's giving U = 0..n*m (the exact null distribution).
    The largest element is an a (adding m to U) or a b: f(n, m, u) = f(n-1, m, u-m) + f(n, m-1, u)."""
    if n == 0 or m == 0:
        return (1,)
    counts = [0] * (n * m + 1)
    for u, c in enumerate(_u_distribution(n - 1, m)):
        counts[u + m] += c
    for u, c in enumerate(_u_distribution(n, m - 1)):
        counts[u] += c
    return tuple(counts)


def kendall_trend(values: list[float]) -> tuple[float, float]:
    """(Kendall's tau of the values against their order, its exact two-sided p-value): whether a series trends."""
    n = len(values)
    pairs = n * (n - 1) // 2
    if pairs == 0:
        return 0.0, 1.0
    inversions = sum(values[i] > values[j] for i in range(n) for j in range(i + 1, n))
    s = pairs - 2 * inversions  # concordant less discordant pairs
    counts = _inversions(n)
    p = sum(c for k, c in enumerate(counts) if abs(pairs - 2 * k) >= abs(s)) / sum(counts)
    return s / pairs, min(1.0, p)


@lru_cache(maxsize=None)
def _inversions(n: int) -> tuple[int, ...]:
    """Permutations of n items with 0, 1, ... inversions (Mahonian numbers: Kendall's exact null distribution):
    the n-th item placed at each of n positions adds 0..n-1 inversions to a permutation of n-1."""
    if n <= 1:
        return (1,)
    prev = _inversions(n - 1)
    counts = [0] * (len(prev) + n - 1)
    for k, c in enumerate(prev):
        for extra in range(n):
            counts[k + extra] += c
    return tuple(counts)


def differs(a: list[float], b: list[float]) -> tuple[bool, str]:
    """(real difference?, how it was judged)."""
    if not a or not b:
        return False, "no repetitions"
    if len(a) >= MIN_REPS_FOR_U and len(b) >= MIN_REPS_FOR_U:
        p = mann_whitney_p(a, b)
        return p < ALPHA, f"U test p={p:.3f}"
    apart = max(a) < min(b) or max(b) < min(a)
    return apart, "repetition ranges " + ("apart" if apart else "overlap")


def against_previous(run, rung) -> tuple[str, str] | None:
    """A rung against the rung it is measured against (run.previous), drift included: (state, how), state one of
    "real", "noise", "drift", "under drift"; None without a previous rung.

    Where that rung was timed again later in the run (a `control` rung: the top timed again after the extras), a
    rung it brackets is real only if it differs from both timings in the same direction, by the smaller of its two
    ratios; a difference from one alone is "drift" (the machine's, between the two timings). The control's own
    difference is drift, and so is an anti-variant (slowed on purpose) found faster. A real difference no larger
    than the largest drift measured elsewhere in this run (`drifts`; a bracketed rung's own control left out, the
    bracket has answered for it) is "under drift": no interval over one rung's repetitions sees drift, and rungs
    timed apart are uncertain by about that much."""
    prev = run.previous(rung)
    if prev is None:
        return None
    if (paired := _paired_verdict(rung, prev)) is not None:
        return paired
    real, how = differs(prev.rep_tokens_per_sec, rung.rep_tokens_per_sec)
    if rung.kind == "control":
        return ("drift" if real else "noise"), how
    ratio = rung.tokens_per_sec / prev.tokens_per_sec
    again = _timed_again(run, prev)
    if again is not None:
        real2, how2 = differs(again.rep_tokens_per_sec, rung.rep_tokens_per_sec)
        ratio2 = rung.tokens_per_sec / again.tokens_per_sec
        how = f"{prev.name}: {how}; {ratio2:.2f}x {again.name}, the same timed again after: {how2}"
        if not (real and real2 and (ratio > 1) == (ratio2 > 1)):
            return ("drift" if real or real2 else "noise"), how
        how = "against both timings, " + how
        ratio = min(ratio, ratio2, key=lambda x: abs(log(x)))
    if not real:
        return "noise", how
    if rung.anti_variant and ratio > 1:
        return "drift", how + "; slowed on purpose, so faster is the machine's drift"
    # Drift measured elsewhere: not this rung's own ratio, nor the control's that brackets it (the bracket answered it).
    others = [d for d in drifts(run) if d[2] != rung.name and (again is None or d[2] != again.name)]
    if others:
        what, drift, _ = max(others, key=lambda d: abs(log(d[1])))
        if abs(log(ratio)) <= abs(log(drift)):
            return "under drift", f"{how}; no more than this run's drift, {what} {drift:.2f}x"
    return "real", how


def _paired_verdict(rung, prev) -> tuple[str, str] | None:
    """A rung timed beside the rung it is measured against (docs/measurement.md: Pairs): "disturbed" where the
    machine's speed moved more than the difference or other work took its cores, else "real" where the pairs' interval leaves out 1, else
    "noise"; an anti-variant found faster is drift. None for a rung timed alone."""
    p = rung.paired or {}
    if p.get("with") != prev.name or "ratio" not in p:
        return None
    lo, hi = p["interval"]
    how = f"paired: {len(p['ratios'])} pairs, {lo:.2f}-{hi:.2f}x at {100 * p['level']:.0f}%"
    if p.get("disturbed"):
        cores = f", the run got {100 * p['core_share']:.0f}% of its cores" if p.get("busy") else ""
        return "disturbed", f"{how}; the machine's speed moved {p['movement']:.2f}x{cores} while they were timed"
    if not (lo > 1 or hi < 1):
        return "noise", how
    if rung.anti_variant and p["ratio"] > 1:
        return "drift", how + "; slowed on purpose, so faster is the machine's drift"
    return "real", how


def _timed_again(run, rung):
    """The control rung that times `rung` again later in the run, if one ran."""
    return next((c for c in run.rungs if c.kind == "control" and c.ok and run.previous(c) is rung), None)


def drifts(run) -> list[tuple[str, float, str]]:
    """The drift this run measured, as (what, ratio, the rung whose own ratio it is, else ""): each second timing of a step that differs from its first
    beyond noise — the control rungs (the top timed again after the extras), each reference's C++ rung timed again
    right after the reference (rungs.json references[].again), second over first — and, as a bound on it, an
    anti-variant's rung (slowed on purpose; on a CPU sync_every_step adds nothing) faster than the rung it is built
    on: its gain (the smaller against both timings where a control brackets it)."""
    found = []
    for r in run.rungs:
        prev = run.previous(r) if r.ok else None
        if prev is None or _paired_verdict(r, prev) or not differs(prev.rep_tokens_per_sec, r.rep_tokens_per_sec)[0]:
            continue  # a paired rung's ratio has its drift taken out
        ratio = r.tokens_per_sec / prev.tokens_per_sec
        if r.kind == "control":
            if r.batch != prev.batch:  # backed off to another batch (out of memory): another step, not drift
                continue
            found.append((r.name, ratio, r.name))
        elif r.anti_variant and ratio > 1:
            again = _timed_again(run, prev)
            if again is not None:
                ratio2 = r.tokens_per_sec / again.tokens_per_sec
                if ratio2 <= 1 or not differs(again.rep_tokens_per_sec, r.rep_tokens_per_sec)[0]:
                    continue  # no faster than the second timing: that drift is the control's
                ratio = min(ratio, ratio2)
            found.append((f"{r.name} (slowed on purpose)", ratio, r.name))
    for ref in run.references:
        again = ref.get("again") or {}
        first = run.rung(again.get("rung", ""))
        reps = (again.get("repetitions") or {}).get("tokens_per_sec") or []
        if first is not None and first.ok and again.get("cpp_tokens_per_sec") and differs(first.rep_tokens_per_sec, reps)[0]:
            when = "beside" if "paired" in again else "after"
            found.append((f"{first.name} timed again {when} {ref['name']}", again["cpp_tokens_per_sec"] / first.tokens_per_sec,
                          ""))
    return found
