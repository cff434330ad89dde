"""Is a difference between two rungs real or noise? Mann-Whitney U (as Google Benchmark's compare.py)."""

from __future__ import annotations

from functools import lru_cache
from math import comb

ALPHA = 0.05
MIN_REPS_FOR_U = 4  # below this the U test cannot reach p < 0.05; ranges are compared instead


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


def differs(a: list[float], b: list[float]) -> tuple[bool, str]:
    """(real difference?, how it was judged)."""
    if not a or not b:
        return False, "no repetitions"
    if len(a) >= MIN_REPS_FOR_U and len(b) >= MIN_REPS_FOR_U:
        p = mann_whitney_p(a, b)
        return p < ALPHA, f"U test p={p:.3f}"
    apart = max(a) < min(b) or max(b) < min(a)
    return apart, "repetition ranges " + ("apart" if apart else "overlap")
