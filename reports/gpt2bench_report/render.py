"""Run directories -> DIR/report.md, a self-contained DIR/report.html (charts embedded), and each chart
as PNG and SVG."""

from __future__ import annotations

import base64
import html
import io
import re
from pathlib import Path

from . import charts, generations
from .findings import by_kind, findings
from .notes import _STATE, _first_line, _short, error_texts, rung_why, run_notes
from .load import Run, device_groups
from .matmuls import _PARTIAL_KERNELS, fp8_gemm_section, gemm_section
from .stats import against_previous, paired_word


_fmt = charts.fmt


def _parity(r) -> str:
    """The verdict, the largest loss deviation and, where compared, the first step's gradient norm over the baseline's."""
    if r.parity_verdict == "n/a":
        return r.parity_verdict
    grad = f", |grad| {r.parity_grad_ratio:.3f}x" if r.parity_grad_ratio else ""
    # judged against the rung it is built on (an extra on batch_scaling's top); a problem rung's check is its own
    against = f" vs {r.parity_against}" if r.parity_against not in ("", "baseline") and r.parity_judged_as != "problem" else ""
    return f"{r.parity_verdict} ({r.parity_dev:.1e}{grad}){against}"


def _p_value(how: str) -> str:
    """The U test's p from a verdict's words ("U test p=0.032; ..."), the first one; "-" where there was none."""
    m = re.search(r"p=([0-9.]+)", how)
    return m.group(1) if m else "-"


def ladder_table(run: Run) -> list[list[str]]:
    """Rows of the per-run table: every rung, skipped and failed ones included, with why (cut to CELL characters:
    the notes say it in full, and the noise verdict's reasons)."""
    rows = [["rung", "status", "tok/s", "vs prev", "vs base", "step ms", "peak alloc GiB", "MFU", "parity", "noise",
             "p", "tok/s interval", "cv"]]
    base = None
    for r in run.rungs:
        prev = run.previous(r)
        if not r.ok:
            rows.append([r.name, r.status, "-", "-", "-", "-", "-", "-", "-", _short(rung_why(r)), "-", "-", "-"])
            continue
        verdict = against_previous(run, r)
        noise, p = ("", "-") if verdict is None else (_STATE[verdict[0]], _p_value(verdict[1]))
        interval = "-" if not r.ci else f"{r.ci[0]:,.0f}-{r.ci[1]:,.0f} ({100 * (r.ci_level or 0):.1f}%)"
        rows.append([
            r.name, "ok (throttled)" if r.throttled else "ok", _fmt(r.tokens_per_sec),
            f"{run.ratio(r, prev):.2f}x" if prev else "-",
            f"{run.vs_base(r):.2f}x" if base else "-",
            _fmt(r.step_ms, ".2f"), _fmt((r.peak_alloc_bytes or 0) / charts.GIB, ".3f"),
            "-" if r.mfu is None else "?" if run.mfu_unreliable else f"{100 * r.mfu:.1f}%",
            _short(_parity(r)), noise, p,
            interval, "-" if r.cv is None else f"{100 * r.cv:.1f}%",
        ])
        base = base or r
    return rows


def _failure(ref: dict) -> str:
    """Why a reference has no result: "error: ..." for its own failure, else what stopped it."""
    status, said = ref.get("status", "?"), _first_line(ref.get("error", ""))
    return f"error: {said}" if status == "error" else said or status


def _first_step(res: dict) -> str:
    """A reference's first step in seconds (a compiled one's: its compilation), and where inductor took its graphs
    from its on-disk cache (warmed by an earlier process: gpu_session.sh first), how many: a cache hit's seconds are
    not a compilation's."""
    cell = _fmt(res.get("first_step_s"), ".1f")
    cache = res.get("inductor_fx_graph_cache") or {}
    hits, misses = cache.get("hits", 0), cache.get("misses", 0)
    if hits and not misses:
        return f"{cell} (graphs from the cache)"
    if hits:
        return f"{cell} ({hits} of {hits + misses} graphs from the cache)"
    return cell


def _compared_with(ref: dict) -> str:
    """The C++ rung a reference is held against, and the faster ones it is not (rungs.json's passed_over: a rung
    whose parity failed computes another step)."""
    said = ref.get("compared_with", "-")
    by_why: dict[str, list[str]] = {}  # one clause a reason: three fp32 rungs on a CPU whose bf16 is slow
    for p in ref.get("passed_over", []):
        by_why.setdefault(p.get("why", "?"), []).append(p.get("rung", "?"))
    passed = [f"not {', '.join(rungs)}: {why}" for why, rungs in by_why.items()]
    return said + (f" ({'; '.join(passed)})" if passed else "")


def reference_table(run: Run) -> list[list[str]]:
    """The Python reference rungs beside the C++ ones: never in the ladder's speed-ups."""
    rows = [["reference (Python)", "batch", "status", "tok/s", "compared with", "C++ tok/s", "C++ / Python",
             "its interval", "C++'s other timing / Python", "parity", "first step s", "torch"]]

    def interval(ri: dict | None) -> str:
        return f"{ri['low']:.2f}-{ri['high']:.2f}x ({100 * ri['level']:.0f}%{paired_word(ri)})" if ri else "-"

    for ref in run.references:
        res, cfg = ref.get("result", {}), ref.get("config", {})
        ok = ref.get("status") == "ok"
        ri, again = ref.get("ratio_interval"), ref.get("again") or {}
        # paired: the ratio is the pairs', the other timing the ladder's first; else the rung timed again after it
        other, when = (ref["first_timing"], "first, the ladder's") if "first_timing" in ref else (again, "timed again after it")
        if "ratio" in other:
            again_cell = (f"{other['ratio']:.2f}x" + (f"; {interval(other['ratio_interval'])}" if other.get("ratio_interval") else "")
                          + f" ({when})")
        else:
            again_cell = _first_line(again.get("error", "")) or "-"
        rows.append([
            ref.get("name", "?"), str(cfg.get("batch", "")),
            ref.get("status", "?") if ok else _failure(ref),
            _fmt(ref.get("python_tokens_per_sec", res.get("tokens_per_sec"))) if ok else "-", _compared_with(ref),
            _fmt(ref.get("cpp_tokens_per_sec")), _fmt(ref.get("ratio"), ".2f") + "x" if "ratio" in ref else "-",
            interval(ri), again_cell,
            ref.get("parity", {}).get("verdict", "n/a"), _first_step(res) if ok else "-",
            res.get("torch_version", "-"),
        ])
    return rows


def eager_gaps(run: Run, rows_at_most: int = 25) -> list[tuple[str, list[list[str]]]]:
    """Each reference rung with a breakdown beside the C++ rung it is compared with (issue 15's "find the eager gap
    first"): what one step issues in each — ATen ops on a CPU, kernel launches on a GPU — and every name whose
    count or time differs, the largest time difference first (then the largest count difference)."""
    out = []
    for ref in run.references:
        py = _without_ranges(ref.get("result", {}).get("breakdown") or {})
        rung = ref.get("compared_with")
        cpp = run.breakdown_file(rung) if rung else None
        if not py.get("by_name") or not cpp or "by_name" not in cpp:
            continue
        a = {n["name"]: n for n in cpp["by_name"]}
        b = {n["name"]: n for n in py["by_name"]}

        def get(d: dict, name: str, key: str) -> float:
            return d[name][key] if name in d else 0.0

        def gap(name: str) -> tuple[float, float]:
            return (get(b, name, "ms_per_step") - get(a, name, "ms_per_step"),
                    get(b, name, "count_per_step") - get(a, name, "count_per_step"))

        floor = 0.005 * cpp.get("step_ms", 0.0)  # a time difference under 0.5% of the step is noise here
        names = [n for n in set(a) | set(b) if abs(gap(n)[1]) > 1e-9 or abs(gap(n)[0]) > floor]
        names.sort(key=lambda n: (-abs(gap(n)[0]), -abs(gap(n)[1]), n))
        unit = py.get("events", "events")
        rows = [[f"{unit}: name", f"C++ {rung} per step", f"Python {ref.get('name')} per step", "C++ ms", "Python ms",
                 "Python - C++ ms"],
                [f"(all {unit}; ms = the profiled step)", _fmt(cpp.get("events_per_step")),
                 _fmt(py.get("events_per_step")), _fmt(cpp.get("step_ms"), ".2f"), _fmt(py.get("step_ms"), ".2f"),
                 f"{py.get('step_ms', 0.0) - cpp.get('step_ms', 0.0):+.2f}"],
                ["(host time in the step's calls, unprofiled)", "", "", _fmt(cpp.get("host_ms_per_step"), ".2f"),
                 _fmt(py.get("host_ms_per_step"), ".2f"),
                 f"{py['host_ms_per_step'] - cpp['host_ms_per_step']:+.2f}" if "host_ms_per_step" in py and
                 "host_ms_per_step" in cpp else "-"]]
        for n in names[:rows_at_most]:
            rows.append([n if len(n) <= 100 else n[:97] + "...", _fmt(get(a, n, "count_per_step")) if n in a else "-",
                         _fmt(get(b, n, "count_per_step")) if n in b else "-",
                         _fmt(get(a, n, "ms_per_step"), ".3f"), _fmt(get(b, n, "ms_per_step"), ".3f"), f"{gap(n)[0]:+.3f}"])
        left = len(names) - rows_at_most
        title = (f"Eager gap: {rung} (C++, its breakdown pass) beside {ref.get('name')} (Python, torch.profiler), one "
                 f"step each; {len(names)} names differ in count or by more than 0.5% of the step in time"
                 + (f" ({left} more in breakdown/{rung}.json and rungs.json's references)" if left > 0 else "")
                 + (". Times: the ops no other ATen op called (nested ones 0)" if unit == "ATen ops" else
                    ". Times: on the device"))
        out.append((title, rows))
    return out


_RANGE = re.compile(r"[\w.]+#[\w.]+")  # torch's record_function ranges: "Optimizer.step#AdamW.step", "ProfilerStep#3"


def _without_ranges(py: dict) -> dict:
    """A GPU reference's kernels without the device spans of record_function ranges, which references written
    before 2026-11-29 listed as launches beside the kernels they span (a kernel's name has parentheses)."""
    spans = [n for n in py.get("by_name", []) if _RANGE.fullmatch(n["name"])]
    if py.get("events") != "kernel launches" or not spans:
        return py
    return dict(py, by_name=[n for n in py["by_name"] if n not in spans],
                events_per_step=py.get("events_per_step", 0.0) - sum(n["count_per_step"] for n in spans))


def work_gaps(run: Run) -> list[tuple[str, list[list[str]]]]:
    """Each reference beside the C++ rung it is compared with by kind of work (findings.by_kind): the reference's
    names sorted into the rung's breakdown categories by the same rule, the largest difference first."""
    out = []
    for ref in run.references:
        if not (kinds := by_kind(ref)):
            continue
        rung, name = ref.get("compared_with", "?"), ref.get("name", "?")
        rows = [["kind of work", f"C++ {rung} ms", f"Python {name} ms", "Python - C++ ms"]]
        rows += [[k, f"{c:.3f}", f"{p:.3f}", f"{p - c:+.3f}"] for k, c, p in kinds]
        c, p = sum(k[1] for k in kinds), sum(k[2] for k in kinds)
        rows.append(["(all)", f"{c:.3f}", f"{p:.3f}", f"{p - c:+.3f}"])
        batch = (ref.get("config") or {}).get("batch", "?")
        out.append((f"By kind of work: {rung} beside {name} at B={batch}, one step's time in each category of the "
                    "breakdown (on a GPU the kernels' device time; a generic ATen kernel the reference runs names no "
                    "op: other or elementwise)", rows))
    return out


def _kept_cell(e: dict) -> str:
    """top+kept's verdict on one variant, short: kept or not, with the step's ratio (the variant's rung over the rung
    it was compared with) and its interval, and the ratio over the top timed again after the extras; its reason
    (rungs.json's `why`, a sentence) only where no ratio was recorded."""
    said = "kept" if e.get("kept") else "not kept"
    if "ratio" not in e:
        return f"{said}: {e['why']}" if e.get("why") else said

    def ratio(x: dict) -> str:
        ri = x.get("interval")
        return f"{x['ratio']:.2f}x" + (f" ({ri['low']:.2f}-{ri['high']:.2f}x)" if ri else "")

    again = e.get("again") or {}
    return (f"{said}: {ratio(e)} over {e.get('compared_with', '?')}"
            + (f", {ratio(again)} over {again.get('rung', '?')}" if "ratio" in again else ""))


def _kernel_timing_notes(k: dict) -> list[str]:
    """How a GPU's kernels.json passes were timed: a pass launched by the host carries its launches and autograd,
    more than a small op's kernels take."""
    sides = [(c["variant"], s) for c in k["cases"] for s in c.get("sides", [])]
    if any("timed" not in s for _, s in sides):
        return ["Timed eagerly (a kernels.json from before passes were replayed as CUDA graphs): a pass of tens of "
                "microseconds is timed with the host's launches and autograd around it, which can hide a kernel's "
                "gain or loss."]
    notes = [f"{v}: '{s['name']}' timed eagerly, its host's launches included ({s['timed'][len('eager: '):]})."
             for v, s in sides if s["timed"].startswith("eager: ")]
    if any(s["timed"] == "graph" for _, s in sides):
        notes.insert(0, "Each side timed as replays of a CUDA graph of its pass: the device's time alone.")
    return notes


def kernel_section(run: Run) -> tuple[str, list[list[str]], list[str]] | None:
    """RUN/kernels.json as (title, table, notes): each of our ops against each thing it replaces, one forward +
    backward alone (gpt2bench kernels), beside what the ladder's top+kept rung made of it for the whole step."""
    k = run.kernels
    if k is None:
        return None
    kept = {e.get("variant"): e for r in run.rungs if r.kept and not r.ties for e in r.kept}
    rows = [["op (variant)", "shape", "ours ms", "against", "its ms", "ours Nx", "interval", "op alone",
             "the step (top+kept)"]]
    d, build = k["device"], k.get("build", {})
    notes = ["ours Nx: what it replaces, its median time over ours (> 1: ours is faster); interval: the "
             "Hodges-Lehmann interval of that ratio over every pair of rounds; op alone: ours faster or slower "
             "where the interval leaves out 1. The step: whether top+kept took the variant, judged on the whole "
             "step (a kernel is kept only where it beats what it replaces there): the step's tok/s with it over "
             "the rung it was compared with, and over the top timed again after the extras (intervals as above)."]
    if build.get("git_sha") and run.build.get("git_sha") and build["git_sha"] != run.build["git_sha"]:
        notes.append(f"kernels.json was built at {build['git_sha']}, the run at {run.build['git_sha']}.")
    if k.get("complete") is False:  # files from before the key are whole
        notes.append(_PARTIAL_KERNELS)
    if d.get("type") == "cpu":
        notes.append("On a CPU our ops run their ATen references (no CUDA kernels there): these figures say "
                     "nothing of a GPU.")
    else:
        notes += _kernel_timing_notes(k)
    for c in k["cases"]:
        v = c["variant"]
        step = kept.get(v)
        step_cell = "-" if step is None else _kept_cell(step)
        if "error" in c or "skipped" in c:
            said = f"error: {_first_line(c['error'])}" if "error" in c else f"skipped: {c['skipped']}"
            which = f"{c['alone']} alone" if c.get("alone") else "-"  # one of the variant's cases
            rows.append([v, which, "-", "-", "-", "-", "-", said, step_cell])
            continue
        ours = c["sides"][0]
        for side, x in zip(c["sides"][1:], c["speedup"]):
            low, high = x.get("low"), x.get("high")
            alone = ("-" if low is None or high is None else "ours faster" if low > 1 else "ours slower" if high < 1
                     else "within noise")
            rows.append([v, c.get("shape", ""), _fmt(ours["median_ms"], ".3f"), side["name"],
                         _fmt(side["median_ms"], ".3f"), f"{side['median_ms'] / ours['median_ms']:.2f}x",
                         "-" if low is None else f"{low:.2f}-{high:.2f}x ({100 * x.get('level', 0):.0f}%)", alone,
                         step_cell])
        if c.get("note"):
            notes.append(f"{v}: {c['note']}")
    title = (f"Our kernels op by op (kernels.json: gpt2bench kernels, profile {k.get('profile', {}).get('name', '?')}, "
             f"{k.get('rounds', '?')} rounds in turns, torch {build.get('torch', '?')}, git "
             f"{build.get('git_sha', '?')})")
    return title, rows, notes


def device_table(runs: list[Run]) -> list[list[str]]:
    rows = [["run", "device", "type", "SMs / threads", "memory GiB", "torch", "git", "world size", "status"]]
    for run in runs:
        d = run.device
        rows.append([run.path.name + (" (SYNTHETIC)" if run.synthetic else ""), run.device_name, d.get("type", "?"), str(d.get("sm_count", "?")),
                     f"{d.get('total_memory', 0) / charts.GIB:.1f}", run.build.get("torch", run.context.get("torch_version", "?")),
                     run.build.get("git_sha", "?"), str(d.get("world_size", 1)), run.status])
    return rows


def spread_groups(runs: list[Run]) -> list[list[Run]]:
    """Runs of one device, profile and plan, two or more of them: the groups whose run-to-run spread is shown."""
    groups: dict[tuple, list[Run]] = {}
    for i, same in enumerate(device_groups(runs)):
        for run in same:
            d = run.device  # sm_count: a CPU's threads, so OMP_NUM_THREADS=1 is another "device"
            groups.setdefault((i, d.get("sm_count"), d.get("world_size", 1), run.profile, run.plan), []).append(run)
    return [g for g in groups.values() if len(g) > 1]


def spread_table(group: list[Run]) -> list[list[str]]:
    """Per rung over several runs of one device and profile: each run's median tok/s, the median of those, their
    range and (max - min) / median: what a difference between two runs has to beat to mean anything."""
    names = []
    for run in group:
        names += [r.name for r in run.rungs if r.ok and r.name not in names]
    rows = [["rung", "runs", "median tok/s", "min-max tok/s", "run-to-run spread", "within-run cv (median)"]
            + [run.path.name for run in group]]
    for n in names:
        got = [run.rung(n) for run in group]
        vals = sorted(r.tokens_per_sec for r in got if r and r.ok)
        mid = len(vals) // 2
        med = vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2
        cvs = sorted(r.cv for r in got if r and r.ok and r.cv is not None)
        rows.append([n, str(len(vals)), _fmt(med), f"{vals[0]:,.0f}-{vals[-1]:,.0f}",
                     f"{100 * (vals[-1] - vals[0]) / med:.1f}%", f"{100 * cvs[len(cvs) // 2]:.1f}%" if cvs else "-"]
                    + [_fmt(r.tokens_per_sec) if r and r.ok else (r.status if r else "-") for r in got])
    return rows


def published_table() -> list[list[str]]:
    pub = charts.PUBLISHED["seed000_a100"]
    rows = [["#", "rung (published, seed 000, 1x A100)", "B", "tok/s", "reserved GB"]]
    for p in pub["rungs"]:
        rows.append([str(p["rung"]), p["name"], str(p["batch"]), f"{p['tokens_per_sec']:,}", f"{p['reserved_gb']}"])
    return rows


def _md_cell(c: str) -> str:
    """One Markdown table cell: no line break, every `|` escaped."""
    return " ".join(c.split("\n")).replace("|", "\\|")


def _md(rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows[1:]]
    return "\n".join(out)


def _html_table(rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows[1:])
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def build_figures(runs: list[Run]) -> dict:
    """name -> Figure, in report order (charts that have no data are left out)."""
    figs = {}
    for i, run in enumerate(runs):
        tag = f"run{i}_" if len(runs) > 1 else ""
        if any(r.ok for r in run.rungs):
            figs[tag + "ladder"] = charts.ladder_chart(run)
            figs[tag + "memory"] = charts.memory_chart(run)
            if not run.mfu_unreliable:  # its MFU is "?" in the tables: no bar may show it (notes say why)
                figs[tag + "mfu"] = charts.mfu_chart(run)
        for name, f in charts.waterfall_charts(run).items():
            figs[tag + name] = f
        if (f := charts.phase_chart(run)) is not None:
            figs[tag + "phases"] = f
        if (f := charts.category_chart(run)) is not None:
            figs[tag + "categories"] = f
    if (f := charts.ablation_chart(runs)) is not None:
        figs["ablations"] = f
    if len(runs) > 1:
        figs["side_by_side"] = charts.generations_chart(runs, normalised=False)
        figs["side_by_side_normalised"] = charts.generations_chart(runs, normalised=True)
    return figs


def _save_figures(runs: list[Run], out: Path) -> dict[str, str]:
    """Every chart as PNG and SVG in `out`; returns name -> the PNG in base64, for the self-contained HTML."""
    embedded = {}
    for name, fig in build_figures(runs).items():
        fig.savefig(out / f"{name}.png", dpi=110)
        fig.savefig(out / f"{name}.svg")
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110)
        embedded[name] = base64.b64encode(buf.getvalue()).decode()
        charts.plt.close(fig)
    return embedded


_STYLE = ("body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;color:#222}"
          "h1{font-size:1.4em}h2{font-size:1.15em;border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}"
          "table{border-collapse:collapse;margin:1em 0;font-size:0.8em}td,th{border:1px solid #ccc;"
          "padding:3px 6px;text-align:left}th{background:#eef2f5}tr:nth-child(even) td{background:#fafafa}"
          "img{max-width:100%;display:block;margin:1em 0}pre{white-space:pre-wrap;background:#f6f6f6;"
          "padding:.5em;font-size:0.8em}.warn{color:#a00;font-weight:bold}li{margin:.2em 0}"
          "@media print{body{margin:0;max-width:none}img,table{page-break-inside:avoid}"
          "details{display:block}details>*{display:block}}")


def _findings_section(runs: list[Run]) -> tuple[list[str], list[str]]:
    """## Findings: each run's answers first (findings.py), as Markdown lines and HTML parts."""
    md, parts = ["## Findings", ""], ["<h2>Findings</h2>"]
    for run in runs:
        lines = findings(run)
        head = [f"*{run.label}*", ""] if len(runs) > 1 else []
        md += head + [f"- {line}" for line in lines] + [""]
        parts += ([f"<p><i>{html.escape(run.label)}</i></p>"] if head else []) + [
            "<ul>" + "".join(f"<li>{_html_bold(line)}</li>" for line in lines) + "</ul>"]
    return md, parts


def _devices_section(runs: list[Run], prices: dict[str, float] | None) -> tuple[list[str], list[str]]:
    """## Devices, ## Generations where the runs are of several devices, and the run-to-run spread of each group."""
    md, parts = ["## Devices", "", _md(device_table(runs)), ""], ["<h2>Devices</h2>", _html_table(device_table(runs))]
    if len(device_groups(runs)) > 1:
        tables = [generations.device_facts(runs), generations.generations_table(runs)]
        if prices and (cost := generations.cost_table(runs, prices)):
            tables.append(cost)
        gnotes = generations.notes(runs)
        md += ["## Generations", ""] + sum(([_md(t), ""] for t in tables), []) + [f"- {n}" for n in gnotes] + [""]
        parts += ["<h2>Generations</h2>"] + [_html_table(t) for t in tables]
        parts += ["<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in gnotes) + "</ul>"]
    for group in spread_groups(runs):
        head = f"Run-to-run spread: {group[0].device_name}, profile {group[0].profile}, plan {group[0].plan}"
        note = ("each run's tok/s is the median of its repetitions; across the runs: their median, range, and range "
                "over median. Two runs' figures differ by more than noise only beyond this spread; ratios within one "
                "run (vs prev, vs base) are the sounder comparison.")
        md += [f"## {head}", "", _md(spread_table(group)), "", f"- {note}", ""]
        parts += [f"<h2>{html.escape(head)}</h2>", _html_table(spread_table(group)), f"<p>{html.escape(note)}</p>"]
    return md, parts


def write_report(runs: list[Run], out: str | Path, prices: dict[str, float] | None = None) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    embedded = _save_figures(runs, out)
    title = "gpt2bench report: " + ", ".join(r.label for r in runs)
    md = [f"# {title}", ""]
    parts = [f"<h1>{html.escape(title)}</h1>"]
    if synthetic := [r for r in runs if r.synthetic]:
        warn = ("SYNTHETIC input: " + ", ".join(r.path.name for r in synthetic) + " are test fixtures, not "
                "measurements; their figures below are made up except where their files say quoted.")
        md += [f"**{warn}**", ""]
        parts.append(f"<p class='warn'>{html.escape(warn)}</p>")
    for section in (_findings_section(runs), _devices_section(runs, prices)):
        md += section[0]
        parts += section[1]
    for i, run in enumerate(runs):
        run_md, run_parts = _run_section(run, f"run{i}_" if len(runs) > 1 else "", embedded)
        md += run_md
        parts += run_parts
    for name in ("ablations", "side_by_side", "side_by_side_normalised"):
        if name in embedded:
            md += [f"## {name.replace('_', ' ')}", "", f"![{name}]({name}.png)", ""]
            parts += [f"<h2>{html.escape(name.replace('_', ' '))}</h2>",
                      f'<img alt="{name}" src="data:image/png;base64,{embedded[name]}">']
    note = ("Published numbers (seed 000, one A100, PyTorch 2.6) are the source's, not measurements of this "
            "project; they appear only where labelled \"published\".")
    md += ["## Published reference", "", note, "", _md(published_table()), ""]
    parts += ["<h2>Published reference</h2>", f"<p>{html.escape(note)}</p>", _html_table(published_table())]

    (out / "report.md").write_text("\n".join(md) + "\n")
    (out / "report.html").write_text(
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body>{''.join(parts)}</body></html>\n")
    return out


def _run_section(run: Run, tag: str, embedded: dict[str, str]) -> tuple[list[str], list[str]]:
    """One run's section, Markdown and HTML: its charts first, then its tables, then its notes and full errors."""
    notes = ([run.synthetic + "."] if run.synthetic else []) + run_notes(run)
    md, parts = [], []
    md += [f"## {run.label}: profile {run.profile}, plan {run.plan}", ""]
    parts.append(f"<h2>{html.escape(run.label)}: profile {html.escape(run.profile)}, plan {html.escape(run.plan)}</h2>")
    for kind in ("ladder", "waterfall", "waterfall_add_one", "waterfall_leave_one_out", "memory", "mfu", "phases",
                 "categories"):  # the charts first, then the tables, then the notes
        if tag + kind in embedded:
            md += [f"![{kind}]({tag + kind}.png)", ""]
            parts.append(f'<img alt="{kind}" src="data:image/png;base64,{embedded[tag + kind]}">')
    md += [_md(ladder_table(run)), ""]
    if run.references:
        md += [_md(reference_table(run)), ""]
        for title, rows in work_gaps(run) + eager_gaps(run):
            md += [f"**{title}**", "", _md(rows), ""]
    for section in (kernel_section(run), gemm_section(run), fp8_gemm_section(run)):
        if section:
            ktitle, krows, knotes = section
            md += [f"**{ktitle}**", "", _md(krows), ""] + [f"- {n}" for n in knotes] + [""]
    md += [f"- {n}" for n in notes] + [""]
    parts.append(_html_table(ladder_table(run)))
    if run.references:
        parts.append(_html_table(reference_table(run)))
        for title, rows in work_gaps(run) + eager_gaps(run):
            parts += [f"<p><b>{html.escape(title)}</b></p>", _html_table(rows)]
    for section in (kernel_section(run), gemm_section(run), fp8_gemm_section(run)):
        if section:
            ktitle, krows, knotes = section
            parts += [f"<p><b>{html.escape(ktitle)}</b></p>", _html_table(krows),
                      "<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in knotes) + "</ul>"]
    parts += ["<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>"]
    if errors := error_texts(run):
        md += ["<details><summary>Full error texts</summary>", ""]
        for name, text in errors:
            fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
            md += [f"{name}:", "", fence, text, fence, ""]
        md += ["</details>", ""]
        parts.append("<details><summary>Full error texts</summary>" + "".join(
            f"<p>{html.escape(name)}:</p><pre>{html.escape(text)}</pre>" for name, text in errors) + "</details>")
    md.append("")
    return md, parts


def _html_bold(line: str) -> str:
    """A Markdown line with **bold** in HTML, escaped."""
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", html.escape(line))
