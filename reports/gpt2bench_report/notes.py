"""The notes under a run's tables: what a figure is, how it was taken, and what the table could not say in a cell."""

from __future__ import annotations

import re

from . import charts
from .checks import check_notes
from .load import Run, Rung
from .stats import ALPHA, MIN_REPS_FOR_U, against_previous, differs, drifts

_fmt = charts.fmt


def _first_line(text: str) -> str:
    """A table cell's share of an error: CUDA errors run over several lines (the full text is in the details
    block under the tables, and in rungs.json)."""
    return text.splitlines()[0] if text else ""


_STATE = {"real": "real", "noise": "noise", "drift": "drift", "under drift": "under-drift", "disturbed": "disturbed"}


CELL = 60  # the widest cell of the rung table: what does not fit is said in full in the notes


def _short(text: str, width: int = CELL) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def _own_skips(r: Rung, error: str) -> list[dict]:
    """The skipped variants a rung's row explains: its own variant's, where it is among them (the ones before it
    are explained on their own rows: 13_ddp had repeated tf32's, pinned_memory's and cuda_graph's reasons),
    else every one when the error gives none; a reason the error already holds is not said twice."""
    own = [s for s in r.skipped if s.get("variant") == r.variant]
    return [s for s in (own or ([] if error else r.skipped)) if s.get("reason", "") not in error]


def rung_why(r: Rung) -> str:
    """Why a rung did not run or did not finish: its error's first line and its own skipped variants' reasons."""
    error = _first_line(r.error)
    return "; ".join([error] * bool(error) + [f"{s['variant']}: {s['reason']}" for s in _own_skips(r, error)])


def run_notes(run: Run) -> list[str]:
    """What the table's figures are, in words: the MFU's basis, the spread and noise methods, and what
    the device does to them (emulated bf16, throttling)."""
    return check_notes(run) + _method_notes(run) + _reference_notes(run) + _choice_notes(run) + _rung_notes(run)


def _method_notes(run: Run) -> list[str]:
    """How the figures are taken, and what the table cut short or could not say in a word."""
    notes = [
        "MFU: model FLOPs/s (matmuls only: 6·(L·12·C² + V·C) + 6·L·C·T per token; rungs.json flops.formula) over "
        + (run.mfu_basis or "the peak in rungs.json") + "; one denominator for every rung, so MFU ratios are "
        "speed-up ratios. rungs.json also has each rung's efficiency against its own precision's peak and against "
        "the matmul rate measured here.",
        "tok/s is the median of the repetitions; its interval is the distribution-free confidence interval of the "
        "median from order statistics, at the coverage shown (5 repetitions reach 93.75%, 9 reach 96.1%); cv is "
        "the repetitions' standard deviation over their mean.",
        "noise, for a rung timed beside the rung it is measured against (paired, docs/measurement.md: Pairs): real "
        "where the interval of the pairs' ratios leaves out 1, else noise; \"disturbed\" where the machine's speed "
        "moved more than the difference while the pairs ran (the ratio is then not claimed). For a rung timed alone "
        f"(older runs): a difference from the previous rung is real when an exact two-sided Mann-Whitney U test gives "
        f"p < {ALPHA} (both rungs with {MIN_REPS_FOR_U}+ repetitions, as Google Benchmark's compare.py), else when "
        "the repetitions' ranges do not overlap. Where the rung measured against was timed again later in the "
        "run (the control rung, the top timed again after the extras), a rung between the two timings is real only "
        "against both, in the same direction, and \"drift\" against one alone; any other real difference no "
        "larger than the largest drift the run measured (a control, or a reference's C++ rung timed again after "
        "it, against its first timing; an anti-variant found faster than its base, as a bound) is \"under-drift\" (the chart: \"(under drift)\"); p is the U test's, \"-\" where the ranges decided.",
    ]
    for r in run.rungs:
        if not r.ok and len(why := rung_why(r)) > CELL:
            notes.append(f"{r.name} ({r.status}): {why}")
        elif r.ok and (verdict := against_previous(run, r)) and verdict[0] in ("drift", "under drift", "disturbed"):
            notes.append(f"{r.name}: {_STATE[verdict[0]]}: {verdict[1]}")
    if run.mfu_unreliable:
        notes.insert(0, f"MFU not shown (\"?\"): {run.mfu_unreliable}. No MFU of this run is a fact; tok/s are.")
    found = drifts(run)
    if found:
        notes.append("drift this run measured, each beyond noise (a step timed twice: the second timing over the "
                     "first; an anti-variant found faster than its base: its gain): " + "; ".join(f"{what} {ratio:.3f}x" for what, ratio, _ in found) + ". Differences between "
                     "rungs timed apart no larger than the largest are \"under-drift\".")
    if run.flop_shares:
        s = run.flop_shares
        notes.append(f"where a token's model FLOPs go here: blocks' weight matmuls {100 * s['blocks']:.1f}%, LM head "
                     f"{100 * s['lm_head']:.1f}%, causal attention {100 * s['attention']:.1f}% (GPT-2 124M at T=1024: "
                     "63.9 / 29.0 / 7.1).")
    return notes


def _reference_notes(run: Run) -> list[str]:
    """How to read the reference rungs: the ratio, the cards, the compile forms, the clocks."""
    notes = []
    if run.references:
        notes.append("reference rungs: the same step in Python PyTorch, same device, data and batch (docs/reference-rungs.md"
                     "); C++ / Python above 1 means the C++ rung is faster; its interval is where noise alone "
                     "could put it (Hodges-Lehmann over the repetitions' pairwise tok/s ratios, Mann-Whitney "
                     "distribution-free, at the coverage shown). \"paired\": the C++ rung was timed again with "
                     "its repetitions alternating with the reference's, the ratio the median of the pairs' (sign-test "
                     "interval), so a drift of the machine moves both sides alike; its other timing is the ladder's. "
                     "Else the C++ rung was timed again right after the reference: its two timings bracket the "
                     "Python one, and a ratio that holds at both is not the machine's drift between them. First "
                     "step: torch.compile's compilation where compiled.")
        if len(run.cards) > 1:
            notes.append(f"this run was timed on {len(run.cards)} cards of one model ({', '.join(run.cards)}; "
                         "resumed on another machine): a reference may have run on another card than its C++ rung's "
                         "first timing, whose ratio is then across cards; a paired ratio, or one timed again right "
                         "after the reference, is one card's.")
        scoped = [ref for ref in run.references if (ref.get("result") or {}).get("compile_scopes")]
        if scoped:
            notes.append("torch.compile both ways a user writes it, each timed, the faster the reference's tok/s: "
                         "the model alone, the loss eager after it (seed 000's code), and the model returning its "
                         "loss (nanoGPT's; the loss inside the graph): " + "; ".join(
                             f"{ref['name']} at batch {ref.get('config', {}).get('batch', '?')}: " + ", ".join(
                                 f"{scope} failed ({v['error']})" if "error" in v else f"{scope} {_fmt(v.get('tokens_per_sec'))} tok/s"
                                 for scope, v in ref["result"]["compile_scopes"].items())
                             + f" ({ref['result'].get('compile_scope', '?')} taken)" for ref in scoped) + ".")
        clocked = [(ref, _reference_clocks(ref)) for ref in run.references]
        clocked = [(ref, words) for ref, words in clocked if words]
        if clocked:
            notes.append("the device's SM clock over each reference's timed steps (NVML, sampled by gpt2bench while "
                         "the Python process ran, the median; each compiled form's over its own): " + "; ".join(
                             f"{ref['name']} at batch {ref.get('config', {}).get('batch', '?')}: {words}"
                             for ref, words in clocked) + ".")
    return notes


def _choice_notes(run: Run) -> list[str]:
    """The device's bf16, and what each setting settled by timing (rungs.json's `choices`) timed and took."""
    notes = []
    bf16 = run.device.get("bf16_support", "")
    if run.device.get("type") == "cpu" and bf16.startswith("emulated"):
        notes.append("bf16 on this CPU is emulated (no AMX-BF16 or AVX512-BF16): bf16 matmuls run through "
                     "conversions to fp32, so bf16 rungs are slower than fp32 ones here (an AVX2-only AMD EPYC took "
                     "20x the fp32 step time); on a GPU or an AMX CPU the same rungs are faster.")
    settings = {c["setting"]: c.get("rule", "") for r in run.rungs for c in r.choices}
    for setting, rule in settings.items():
        made = [(r, c) for r in run.rungs for c in r.choices if c["setting"] == setting]
        timed = {r.name for r, c in made if not c.get("timed_for")}
        # a rung that took an earlier rung's timing of the same key is named beside that timing, not said again
        reused = {}
        for r, c in made:
            if c.get("timed_for") in timed:
                reused.setdefault(c["timed_for"], []).append(r.name)
        chosen = "; ".join(_timing(r, c, reused.get(r.name, [])) for r, c in made
                           if c.get("timed_for") not in timed)
        notes.append(f"settings.{setting}: fastest, timed once a run for each key ({rule}), in ms: {chosen}.")
    return notes


def _first_sentence(text: str) -> str:
    """An error's gist for a one-line note (ATen's add a hint after it); rungs.json keeps the whole."""
    return re.split(r"(?<=\.)\s+(?=[A-Z])", _first_line(text.strip()), maxsplit=1)[0]


def _timing(r: Rung, c: dict, also: list[str]) -> str:
    """'07_sdpa flash (flash 3.01, math 4.07; efficient, cudnn: <why>; without the choice: ...), and so 08, 09
    (the same <key>)': one timing of a setting, the candidates that could not run grouped by why."""
    if c.get("timed_for"):  # its timing's rung is not in this run (another rung filter)
        return f"{r.name} {c['chosen']} (as {c['timed_for']}: the same {c.get('key', 'inputs')})"
    tries = c.get("tries", [])
    whys: dict[str, list[str]] = {}
    for t in tries:
        if "ms" not in t:
            whys.setdefault(_first_sentence(t.get("why", "")), []).append(t["candidate"])
    said = [", ".join(f"{t['candidate']} {t['ms']:.3g}" for t in tries if "ms" in t)]
    said += [f"{', '.join(names)}: {why}" for why, names in whys.items()]
    own = (f"; without the choice: {c['incumbent']}, kept unless another is faster by more than "
           f"{100 * c.get('margin', 0):.0f}%" if c.get("incumbent") else "")
    after = f", and so {', '.join(also)} (the same {c.get('key', 'inputs')})" if also else ""
    return f"{r.name} {c['chosen']} ({'; '.join(x for x in said if x)}{own}){after}"


def _rung_notes(run: Run) -> list[str]:
    """What happened to single rungs: the top timed again, the kept rungs, lost devices and processes, clocks."""
    notes = []
    for r in run.rungs:
        top = run.previous(r)
        if r.kind == "control" and r.ok and top:
            real, how = differs(top.rep_tokens_per_sec, r.rep_tokens_per_sec)
            notes.append(f"{r.name}: {top.name} timed again after the extras, {r.tokens_per_sec / top.tokens_per_sec:.3f}x "
                         f"its first timing ({'a real difference' if real else 'within noise'}, {how}): the machine's "
                         "drift over those minutes, which no interval over one rung's repetitions sees; ratios between "
                         "rungs timed apart in this run are uncertain by about that much. An extra joins the kept "
                         "rungs only if faster than both timings.")
    said: dict[str, str] = {}  # each extra's reasons, as a kept rung gave them: the first rung that said them
    for r in run.rungs:
        if r.kept is not None:
            joined = [e["variant"] + (" (a tie)" if e.get("tie") else "") for e in r.kept if e.get("kept")]
            why = "; ".join(f"{e['variant']}: {e.get('why', '')}" for e in r.kept)
            notes.append(f"{r.name}: the top with every extra that beat it in this run"
                         f"{' or tied it (not measurably slower than either timing of it)' if r.ties else ''}, settled as it started: "
                         + (", ".join(joined) if joined else "none") + " kept ("
                         + (f"each extra's reason as for {said[why]}" if why in said else why) + ").")
            said.setdefault(why, r.name)
    for r in run.rungs:
        if r.device_fault:
            notes.append(f"{r.name} lost the device ({_first_line(r.error)}): a kernel's fault loses the process's CUDA "
                         "context, so that process ended there and the rungs after it ran in a new one "
                         "(gpt2bench ladder --resume), which keeps this rung as the error it was.")
    for r in run.rungs:
        if r.ended_processes and r.status == "ok":  # one that ended two is an error, its text in the table
            notes.append(f"{r.name}: a process ended during it recording nothing (a crash, or a kill it could not stop "
                         "for: the ladder's log says which); it ran again in a new one (gpt2bench ladder --resume), "
                         "and these figures are that run's.")
    for r in run.rungs:
        if r.throttled:
            notes.append(f"{r.name} was THROTTLED while timed: {r.clocks.get('throttled_why', '')} (NVML); "
                         "its tok/s understates the step.")
    capped = [r for r in run.rungs if r.clocks and (r.clocks.get("power_capped_share") or 0) >= 0.5]
    if capped:
        notes.append("At the power limit while timed (NVML's sw_power_cap in most samples; the device's sustained "
                     "speed under that load, not throttling): " + ", ".join(
                         f"{r.name} ({100 * r.clocks['power_capped_share']:.0f}%, SM clock "
                         f"{r.clocks.get('sm_mhz_median', 0):.0f} of {r.clocks.get('max_sm_mhz', 0):.0f} MHz)"
                         for r in capped) + ".")
    return notes


def error_texts(run: Run) -> list[tuple[str, str]]:
    """(rung or reference, full error text) for the details block under a run's tables: the errors whose table
    cell, one line, could not hold them."""
    out = [(r.name, r.error) for r in run.rungs] + [(ref.get("name", "?"), ref.get("error", "")) for ref in run.references]
    return [(name, text) for name, text in out if "\n" in text.strip()]


def _clock_words(c) -> str:
    """'1980 MHz', with the power cap's share of the samples and a throttle's reason; '' where not sampled."""
    if not (c or {}).get("available"):
        return ""
    words = f"{c.get('sm_mhz_median', 0):.0f} MHz"
    if c.get("power_capped_share", 0) > 0:
        words += f" (power-capped {100 * c['power_capped_share']:.0f}%)"
    if c.get("throttled"):
        words += f" THROTTLED: {c.get('throttled_why', '')}"
    return words


def _reference_clocks(ref) -> str:
    """A reference's clocks (rungs.json's clocks, compile_scope_clocks) in words; '' where none was sampled."""
    scoped = ref.get("compile_scope_clocks") or {}
    if scoped:
        return ", ".join(f"{scope} {w}" for scope, c in scoped.items() if (w := _clock_words(c)))
    return _clock_words(ref.get("clocks"))
