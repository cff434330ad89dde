"""The report from committed fixture runs: tables hold the fixture's numbers, charts' data are checked on
the figure objects, the HTML is self-contained and renders in headless Chromium, bad input is named."""

import html as html_lib
import json
import re
import shutil
import subprocess
from pathlib import Path

import matplotlib.image
import pytest

from conftest import FIXTURES
from gpt2bench_report import ReportError, load_run, write_report
from gpt2bench_report.load import device_groups, same_device
from gpt2bench_report import charts
from gpt2bench_report.__main__ import main
from gpt2bench_report.findings import findings, headline
from gpt2bench_report.generations import bound_by, cost_table, generations_table, times
from gpt2bench_report.matmuls import fp8_gemm_section, gemm_section
from gpt2bench_report.render import (build_figures, eager_gaps, kernel_section, ladder_table, rung_why,
                                     run_notes, work_gaps)
from gpt2bench_report.stats import against_previous, differs, drifts, mann_whitney_p

ROOT = FIXTURES.parents[2]


def rungs_json(name):
    return json.loads((FIXTURES / name / "rungs.json").read_text())["rungs"]


def test_tables_hold_the_fixture_numbers_and_skipped_rungs():
    run = load_run(FIXTURES / "cpu_2threads")
    rows = {r[0]: r for r in ladder_table(run)[1:]}
    for r in rungs_json("cpu_2threads"):
        if r["status"] == "ok":
            assert rows[r["name"]][2] == format(r["median"]["tokens_per_sec"], ",.0f")
            assert rows[r["name"]][8].startswith(r["parity"]["verdict"])
            if r["parity"]["grad_norm_ratio"]:  # the first step's gradient norm beside the losses' deviation
                assert rows[r["name"]][8].endswith(f"|grad| {r['parity']['grad_norm_ratio']:.3f}x)")
    assert rows["05_sdpa"][8].startswith("pass (") and "|grad| 1.000x" in rows["05_sdpa"][8]
    assert rows["02_tf32"][1] == "skipped"
    why = rung_why(run.rung("02_tf32"))
    assert "tf32" in why and "CUDA" in why and why.startswith(rows["02_tf32"][9].rstrip("…"))
    assert f"02_tf32 (skipped): {why}" in run_notes(run)  # the cell cut to 60 characters, the note in full
    assert all(len(c) <= 60 for row in ladder_table(run) for c in row)
    base = run.rungs[0].tokens_per_sec
    sdpa = run.rung("05_sdpa")
    assert rows["05_sdpa"][4] == f"{sdpa.tokens_per_sec / base:.2f}x"
    # vs prev skips the skipped rung: 03 is compared with 01
    assert rows["03_fused_adamw"][3] == f"{run.rung('03_fused_adamw').tokens_per_sec / run.rung('01_mask_on_the_fly').tokens_per_sec:.2f}x"


def test_a_rung_judged_against_the_rung_it_is_built_on_says_so(tmp_path):
    # An extra on batch_scaling's top is judged against the top's trajectory (rungs.json parity.against); a problem
    # rung's own check ("the first batch's loss fell") is set beside nothing.
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURES / "cpu_2threads", run_dir)
    doc = json.loads((run_dir / "rungs.json").read_text())
    ok = [r for r in doc["rungs"] if r["status"] == "ok"]
    ok[-1]["parity"].update({"against": "12_batch_scaling", "judged_as": "precision", "verdict": "pass",
                             "max_abs_dev": 0.1, "grad_norm_ratio": 1.0})
    ok[-2]["parity"].update({"against": "12_batch_scaling", "judged_as": "problem", "verdict": "pass",
                             "max_abs_dev": 3.0, "grad_norm_ratio": 0.0})
    (run_dir / "rungs.json").write_text(json.dumps(doc))
    rows = {r[0]: r for r in ladder_table(load_run(run_dir))[1:]}
    assert rows[ok[-1]["name"]][8] == "pass (1.0e-01, |grad| 1.000x) vs 12_batch_scaling"
    assert rows[ok[-2]["name"]][8] == "pass (3.0e+00)"
    assert rows[ok[0]["name"]][8].startswith(ok[0]["parity"]["verdict"]) and " vs " not in rows[ok[0]["name"]][8]


def test_ladder_chart_data():
    run = load_run(FIXTURES / "cpu_2threads")
    fig = charts.ladder_chart(run)
    ax = fig.axes[0]
    ok = [r for r in rungs_json("cpu_2threads") if r["status"] == "ok"]
    widths = [p.get_width() for p in ax.patches]  # horizontal bars: names read level
    assert widths == pytest.approx([r["median"]["tokens_per_sec"] for r in ok])
    assert [t.get_text() for t in ax.get_yticklabels()] == [r["name"] for r in ok]
    notes = [t.get_text() for t in ax.texts]
    assert notes[0].startswith("1.00x base")
    assert all("✓" in n for n in notes[1:])  # parity passes are marked
    # A panel of its own: our speed-up over the baseline beside the published seed-000 one, labelled as published.
    ax2 = fig.axes[1]
    ours = next(l for l in ax2.get_lines() if l.get_label() == "this run")
    assert list(ours.get_xdata()) == pytest.approx([r["median"]["tokens_per_sec"] / ok[0]["median"]["tokens_per_sec"]
                                                    for r in ok])
    published = next(l for l in ax2.get_lines() if "published" in l.get_label())
    pub = {p["rung"]: p["tokens_per_sec"] for p in charts.PUBLISHED["seed000_a100"]["rungs"]}
    want = [pub[r["published_rung"]] / pub[0] for r in ok if r["published_rung"] in pub]
    assert list(published.get_xdata()) == pytest.approx(want)
    assert not ax.get_shared_x_axes().joined(ax, ax2)  # not drawn over the bars
    charts.plt.close(fig)


def test_memory_mfu_and_phase_charts():
    run = load_run(FIXTURES / "cpu_2threads")
    ok = [r for r in rungs_json("cpu_2threads") if r["status"] == "ok"]
    fig = charts.memory_chart(run)
    alloc = [p.get_height() for p in fig.axes[0].containers[0]]
    assert alloc == pytest.approx([r["median"]["peak_alloc_bytes"] / 2**30 for r in ok])  # GiB
    fig = charts.mfu_chart(run)
    assert [p.get_height() for p in fig.axes[0].patches] == pytest.approx([100 * r["median"]["mfu"] for r in ok])
    charts.plt.close("all")


def test_phases_per_thousand_tokens_with_the_timed_step_marked():
    run = load_run(FIXTURES / "synthetic_h100")
    ok = [r for r in rungs_json("synthetic_h100") if r["status"] == "ok"]
    fig = charts.phase_chart(run)
    ax = fig.axes[0]
    stacks = ax.containers
    assert [c.get_label() for c in stacks] == charts.PHASES + ["other (outside the phases)",
                                                               "unattributed (breakdown step)"]
    for i, r in enumerate(ok):
        per_1k = 1000 / r["tokens_per_step"]  # per 1,000 tokens, not per step
        assert stacks[3][i].get_height() == pytest.approx(r["breakdown"]["phase_ms"]["backward"] * per_1k)
        # the stack reaches the breakdown pass's step time; the hatched part is what no phase holds
        top = stacks[-1][i].get_y() + stacks[-1][i].get_height()
        assert top == pytest.approx(r["breakdown"]["step_ms"] * per_1k)
        assert stacks[-1][i].get_height() == pytest.approx(
            (r["breakdown"]["step_ms"] - sum(r["breakdown"]["phase_ms"].values())) * per_1k)
    timed = next(l for l in ax.get_lines() if l.get_label() == "timed step (median)")
    assert list(timed.get_ydata()) == pytest.approx([r["median"]["step_ms"] * 1000 / r["tokens_per_step"] for r in ok])
    charts.plt.close("all")


def test_categories_stack_each_kind_of_work_per_thousand_tokens():
    run = load_run(FIXTURES / "cpu_2threads")
    ok = [r for r in rungs_json("cpu_2threads") if r["status"] == "ok" and r.get("breakdown")]
    ax = charts.category_chart(run).axes[0]
    stacks = ax.containers
    labels = [c.get_label() for c in stacks]
    assert labels[:len(charts.CATEGORIES)] == charts.CATEGORIES and labels[-1] == "unattributed (breakdown step)"
    for name in ("matmul", "normalization", "attention"):
        bars = stacks[labels.index(name)]
        assert [b.get_height() for b in bars] == pytest.approx(
            [r["breakdown"]["category_ms"].get(name, 0.0) * 1000 / r["tokens_per_step"] for r in ok])
    # the stack holds all the pass counted: the categories' sum is the phases' sum
    for i, r in enumerate(ok):
        top = stacks[-2][i].get_y() + stacks[-2][i].get_height()
        assert top == pytest.approx(sum(r["breakdown"]["phase_ms"].values()) * 1000 / r["tokens_per_step"])
    assert charts.category_chart(load_run(FIXTURES / "synthetic_h100")) is None  # no categories there: no chart
    charts.plt.close("all")


def _waterfall_bars(fig):
    """(x label, bottom, top) of each bar of a waterfall figure."""
    ax = fig.axes[0]
    return [(t.get_text(), p.get_y(), p.get_y() + p.get_height()) for t, p in zip(ax.get_xticklabels(), ax.patches)]


def test_waterfall_composes_each_rung_to_the_total():
    run = load_run(FIXTURES / "cpu_2threads")  # 02_tf32 skipped: 03 is measured against 01
    bars = _waterfall_bars(charts.waterfall_charts(run)["waterfall"])
    ok = {r.name: r.tokens_per_sec for r in run.rungs if r.ok}
    names = [b[0] for b in bars]
    assert names == ["00_baseline", "01_mask_on_the_fly", "03_fused_adamw", "04_native_layers", "05_sdpa",
                     "05_sdpa (total)"]
    level = 1.0
    for (name, lo, hi), prev in zip(bars[1:-1], names[:-2]):
        factor = ok[name] / ok[prev]
        assert (lo, hi) == pytest.approx(tuple(sorted((level, level * factor))))  # floats from the running product
        level *= factor
    assert bars[-1][2] == pytest.approx(ok["05_sdpa"] / ok["00_baseline"]) == pytest.approx(level)
    charts.plt.close("all")


def test_ablation_waterfalls_add_one_gain_and_leave_one_out_loss():
    add = load_run(FIXTURES / "add_one")
    figs = charts.waterfall_charts(add)
    assert "waterfall" not in figs and "waterfall_leave_one_out" not in figs
    bars = _waterfall_bars(figs["waterfall_add_one"])
    base = add.rungs[0].tokens_per_sec
    gains = [add.rung(n).tokens_per_sec / base for n in ("01_add_fused_adamw", "02_add_native_layers", "03_add_sdpa")]
    assert [b[0] for b in bars] == ["00_baseline", "fused_adamw", "native_layers", "sdpa", "product of the gains"]
    assert bars[-1][2] == pytest.approx(gains[0] * gains[1] * gains[2])
    loo = load_run(FIXTURES / "leave_one_out")
    bars = _waterfall_bars(charts.waterfall_charts(loo)["waterfall_leave_one_out"])
    all_ = loo.rung("01_all").tokens_per_sec
    losses = [all_ / loo.rung(n).tokens_per_sec for n in ("02_drop_fused_adamw", "03_drop_native_layers", "04_drop_sdpa")]
    assert [b[0] for b in bars] == ["00_baseline", "fused_adamw", "native_layers", "sdpa", "rest (interactions)",
                                    "01_all (total)"]
    rest = all_ / loo.rungs[0].tokens_per_sec / (losses[0] * losses[1] * losses[2])
    assert bars[4][2] / bars[4][1] == pytest.approx(rest if rest >= 1 else 1 / rest)
    assert bars[-1][2] == pytest.approx(all_ / loo.rungs[0].tokens_per_sec)
    charts.plt.close("all")


def test_two_devices_side_by_side_absolute_and_normalised():
    runs = [load_run(FIXTURES / "cpu_2threads"), load_run(FIXTURES / "cpu_1thread")]
    fig = charts.generations_chart(runs, normalised=False)
    assert len(fig.axes[0].containers) == 2
    assert [p.get_height() for p in fig.axes[0].containers[1]][0] == pytest.approx(runs[1].rungs[0].tokens_per_sec)
    fig = charts.generations_chart(runs, normalised=True)
    for c in fig.axes[0].containers:
        assert c[0].get_height() == pytest.approx(1.0)  # each run's own baseline
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == [r.label for r in runs] and labels[0] != labels[1]
    charts.plt.close("all")


def test_ablations_from_add_one_and_leave_one_out():
    runs = [load_run(FIXTURES / "add_one"), load_run(FIXTURES / "leave_one_out")]
    fig = charts.ablation_chart(runs)
    ax = fig.axes[0]
    assert [c.get_label() for c in ax.containers] == ["alone (add one)", "removed (leave one out)"]
    names = [t.get_text() for t in ax.get_xticklabels()]
    assert names == ["fused_adamw", "native_layers", "sdpa"]
    add = runs[0]
    want = add.rung("03_add_sdpa").tokens_per_sec / add.rungs[0].tokens_per_sec
    assert ax.containers[0][2].get_height() == pytest.approx(want)
    loo = runs[1]
    want = loo.rung("01_all").tokens_per_sec / loo.rung("04_drop_sdpa").tokens_per_sec
    assert ax.containers[1][2].get_height() == pytest.approx(want)
    charts.plt.close("all")


def test_noise_marks():
    assert mann_whitney_p([1, 2, 3], [4, 5, 6]) == pytest.approx(0.1)
    assert mann_whitney_p([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(2 / 252)
    assert differs([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])[0]
    assert not differs([1, 3, 5, 7, 9], [2, 4, 6, 8, 10])[0]
    assert not differs([1.0, 2.0], [1.5, 3.0])[0]  # too few for a U test: overlapping ranges
    assert differs([1.0, 2.0], [3.0, 4.0]) == (True, "repetition ranges apart")


def test_a_rung_between_two_timings_of_the_one_it_is_measured_against_is_real_only_against_both(tmp_path):
    # The committed run 20261124-152314 (a 2-core EPYC): 22_top_again came out 1.17x 12_batch_scaling, the top it
    # times again after the extras. Extras 1.11-1.13x the first timing and 0.95-0.97x the second are drift.
    run = load_run(ROOT / "reports" / "reference" / "cpu-amd-epyc" / "20261124-152314-cpu-scaled")
    state = {r.name: against_previous(run, r) for r in run.rungs if r.ok}
    assert state["00_baseline"] is None
    assert state["22_top_again"][0] == "drift"
    for name in ["18_top+fused_gelu_backward", "19_top+gelu_epilogues", "20_top+fused_residual_norm",
                 "21_top+sync_every_step", "16_top+weight_tying"]:
        assert state[name][0] == "drift", (name, state[name])
    assert state["17_top+fused_classifier"] == (
        "real", "against both timings, 12_batch_scaling: U test p=0.008; 1.05x 22_top_again, the same timed again "
        "after: U test p=0.008")
    assert state["14_top+bf16_autocast"][0] == "real"  # slower than both
    assert state["23_top+kept"][0] == "real"
    assert state["05_bf16_cast"] == ("real", "U test p=0.008")  # 2.51x: far beyond the drift
    assert state["12_batch_scaling"][0] == "real"  # 0.85x: just beyond it
    assert state["24_planned_batch+kept"] == (
        "under drift", "U test p=0.008; no more than this run's drift, 22_top_again 1.17x")
    assert state["08_fuse_qkv"][0] == "noise"
    rows = {r[0]: r for r in ladder_table(run)[1:]}
    assert rows["18_top+fused_gelu_backward"][9:11] == ["drift", "0.008"]
    assert rows["24_planned_batch+kept"][9:11] == ["under-drift", "0.008"]
    notes = run_notes(run)  # the verdicts' reasons, in full
    assert any(n.startswith("18_top+fused_gelu_backward: drift: 12_batch_scaling: U test p=0.008; 0.97x 22_top_again")
               for n in notes), notes
    assert "24_planned_batch+kept: under-drift: U test p=0.008; no more than this run's drift, 22_top_again 1.17x" in notes
    labels = {t.get_text().split(",")[0] for t in charts.ladder_chart(run).axes[0].texts}
    assert {"1.13x prev (drift)", "1.22x prev", "0.97x prev (under drift)", "1.00x prev (noise)"} <= labels
    charts.plt.close("all")

    # Faster than the first timing and slower than the second, each beyond noise: drift, not a gain or a loss.
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURES / "cpu_2threads", run_dir)
    doc = json.loads((run_dir / "rungs.json").read_text())
    ok = [r for r in doc["rungs"] if r["status"] == "ok"]
    top, extra, again = ok[-3:]
    for r, tps in [(top, 100.0), (extra, 110.0), (again, 120.0)]:
        r["repetitions"]["tokens_per_sec"] = [tps + d for d in (-2, -1, 0, 1, 2)]
        r["median"]["tokens_per_sec"] = tps
    extra.update(kind="extra", compare_to=top["name"])
    again.update(kind="control", compare_to=top["name"])
    (run_dir / "rungs.json").write_text(json.dumps(doc))
    run = load_run(run_dir)
    assert against_previous(run, run.rung(extra["name"]))[0] == "drift"
    assert against_previous(run, run.rung(again["name"]))[0] == "drift"
    for r, tps in [(extra, 125.0)]:  # now faster than both
        r["repetitions"]["tokens_per_sec"] = [tps + d for d in (-2, -1, 0, 1, 2)]
        r["median"]["tokens_per_sec"] = tps
    (run_dir / "rungs.json").write_text(json.dumps(doc))
    run = load_run(run_dir)
    assert against_previous(run, run.rung(extra["name"]))[0] == "real"
    # An anti-variant (slowed on purpose) faster than both timings of the top, by 1.17x the second: the drift this
    # run saw is at least that, so the extra's 1.04x over the second timing is under it.
    anti = ok[-4]
    anti.update(kind="extra", compare_to=top["name"], anti_variant=True)
    anti["repetitions"]["tokens_per_sec"] = [140.0 + d for d in (-2, -1, 0, 1, 2)]
    anti["median"]["tokens_per_sec"] = 140.0
    (run_dir / "rungs.json").write_text(json.dumps(doc))
    run = load_run(run_dir)
    assert [(w, round(r, 3)) for w, r, _ in drifts(run)] == [(f"{anti['name']} (slowed on purpose)", 1.167),
                                                            (again["name"], 1.2)]
    assert against_previous(run, run.rung(anti["name"]))[0] == "drift"
    state, how = against_previous(run, run.rung(extra["name"]))
    assert state == "under drift" and how.endswith(f"no more than this run's drift, {anti['name']} (slowed on purpose) 1.17x")
    # No control rung: a reference's C++ rung timed again after it measures the drift instead.
    doc = json.loads((FIXTURES / "cpu_2threads" / "rungs.json").read_text())
    ok = [r for r in doc["rungs"] if r["status"] == "ok"]
    for r, tps in [(ok[0], 100.0), (ok[1], 200.0), (ok[2], 210.0)]:
        r["repetitions"]["tokens_per_sec"] = [tps + d for d in (-2, -1, 0, 1, 2)]
        r["median"]["tokens_per_sec"] = tps
    doc["references"] = [{"name": "ref_torch_eager", "status": "ok", "config": {"batch": 4}, "compared_with": ok[0]["name"],
                          "cpp_tokens_per_sec": 100.0, "ratio": 1.0, "result": {"tokens_per_sec": 100.0},
                          "again": {"rung": ok[0]["name"], "cpp_tokens_per_sec": 108.0, "ratio": 1.08,
                                    "repetitions": {"tokens_per_sec": [106.0, 107.0, 108.0, 109.0, 110.0]}}}]
    (run_dir / "rungs.json").write_text(json.dumps(doc))
    run = load_run(run_dir)
    assert drifts(run) == [(f"{ok[0]['name']} timed again after ref_torch_eager", pytest.approx(1.08), "")]
    assert against_previous(run, run.rung(ok[2]["name"])) == (  # 1.05x: real, and no larger than the drift
        "under drift", f"U test p=0.008; no more than this run's drift, {ok[0]['name']} timed again after "
        "ref_torch_eager 1.08x")
    assert against_previous(run, run.rung(ok[1]["name"]))[0] == "real"  # 2x
    md = (write_report([run], tmp_path / "report") / "report.md").read_text()
    assert (f"drift this run measured, each beyond noise (a step timed twice: the second timing over the first; an "
            f"anti-variant found faster than its base: its gain): {ok[0]['name']} timed again after ref_torch_eager "
            "1.080x.") in md


def test_report_files_and_self_contained_html(tmp_path):
    runs = [load_run(FIXTURES / "cpu_2threads"), load_run(FIXTURES / "cpu_1thread")]
    out = write_report(runs, tmp_path / "rep")
    html = (out / "report.html").read_text()
    md = (out / "report.md").read_text()
    for name in ("run0_ladder", "run1_memory", "side_by_side", "side_by_side_normalised"):
        assert (out / f"{name}.png").stat().st_size > 0 and (out / f"{name}.svg").stat().st_size > 0
        assert f"![{name.split('_', 1)[-1] if name.startswith('run') else name}]" in md
    assert not re.search(r"""(src|href)\s*=\s*["'](?!data:)""", html)  # nothing fetched from anywhere
    assert "http://" not in html and "https://" not in html
    assert html.count("data:image/png;base64,") == len(build_figures(runs))
    assert "Published reference" in html and "419,259" in html
    assert "skipped" in md


CHECK_IMAGES = """<script>window.addEventListener("load", () => {
  const rows = [...document.images].map(img => {
    const c = document.createElement("canvas"); c.width = img.naturalWidth; c.height = img.naturalHeight;
    const g = c.getContext("2d"); g.drawImage(img, 0, 0);
    const px = c.width && c.height ? g.getImageData(0, 0, c.width, c.height).data : [];
    let inked = 0; for (let i = 0; i < px.length; i += 4) if (px[i] + px[i + 1] + px[i + 2] < 600) inked++;
    return [img.alt, img.complete, img.naturalWidth, img.naturalHeight, img.width, inked / Math.max(1, px.length / 4)];
  });
  const pre = document.createElement("pre"); pre.id = "imgcheck"; pre.textContent = JSON.stringify(rows);
  document.body.appendChild(pre);
});</script>"""


@pytest.mark.skipif(not (shutil.which("chromium") or shutil.which("chromium-browser")), reason="no chromium")
def test_html_renders_in_headless_chromium(tmp_path):
    runs = [load_run(FIXTURES / "synthetic_h100"), load_run(FIXTURES / "synthetic_h200"), load_run(FIXTURES / "add_one"),
            load_run(FIXTURES / "leave_one_out")]
    out = write_report(runs, tmp_path / "rep")
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    shot = tmp_path / "shot.png"
    subprocess.run(flags + [f"--screenshot={shot}", "--window-size=1200,1600", (out / "report.html").as_uri()],
                   check=True, capture_output=True, timeout=120)
    img = matplotlib.image.imread(shot)
    assert img.shape[0] >= 1000 and img.std() > 0.05  # not blank: text, tables and charts drawn
    # Every chart, as the browser decoded it: loaded, non-zero size, drawn on the page, and not blank (a
    # probe script added to a copy of the page reads each image's pixels through a canvas).
    probe = tmp_path / "probe.html"
    probe.write_text((out / "report.html").read_text().replace("</body>", CHECK_IMAGES + "</body>"))
    dom = subprocess.run(flags + ["--dump-dom", probe.as_uri()], check=True, capture_output=True, text=True,
                         timeout=120).stdout
    rows = json.loads(html_lib.unescape(re.search(r'<pre id="imgcheck">(.*?)</pre>', dom, re.S).group(1)))
    assert len(rows) == len(build_figures(runs)) > 10
    assert {r[0] for r in rows} >= {"ladder", "waterfall", "waterfall_add_one", "waterfall_leave_one_out", "phases"}
    for alt, complete, w, h, shown, inked in rows:
        assert complete and w > 100 and h > 100 and shown > 0, (alt, w, h, shown)
        assert 0.005 < inked < 0.9, (alt, inked)  # some ink, not a solid block
    # The answer first: Findings within the first 20 lines, each of its lines on the page as the browser shows it.
    md = (out / "report.md").read_text().splitlines()
    assert "## Findings" in md[:20]
    found = [ln[2:].replace("**", "") for ln in md[md.index("## Findings"):md.index("## Devices")] if ln.startswith("- ")]
    assert len(found) >= 5 * len(runs)
    text = html_lib.unescape(re.sub(r"<[^>]+>", "", dom))
    for line in found:
        assert line in text, line
    # The rung tables scan: no cell over 60 characters.
    in_rungs = False
    for ln in md:
        in_rungs = ln.startswith("| rung | status |") or (in_rungs and ln.startswith("|"))
        if in_rungs:
            assert all(len(c.strip().replace("\\|", "|")) <= 60 for c in re.split(r"(?<!\\)\|", ln)), ln


def test_bad_input_is_named(tmp_path, capsys):
    with pytest.raises(ReportError, match="nope: no such run directory"):
        load_run(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match=r"empty/rungs\.json: missing"):
        load_run(tmp_path / "empty")
    bad = tmp_path / "bad"
    shutil.copytree(FIXTURES / "cpu_2threads", bad)
    (bad / "rungs.json").write_text("{not json")
    with pytest.raises(ReportError, match=r"bad/rungs\.json: not valid JSON"):
        load_run(bad)
    assert main([str(FIXTURES / "cpu_2threads"), str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 1
    assert "nope: no such run directory" in capsys.readouterr().err


def test_the_command_prints_each_run_s_findings_then_where_the_report_is(tmp_path, capsys):
    assert main([str(FIXTURES / "cpu_2threads"), str(FIXTURES / "cpu_1thread"), "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out.splitlines()
    for name in ("cpu_2threads", "cpu_1thread"):
        run = load_run(FIXTURES / name)
        at = out.index(run.label)
        assert out[at + 1:at + 1 + len(findings(run))] == ["  - " + f.replace("**", "") for f in findings(run)]
    assert out[-2:] == [f"report: {tmp_path / 'o' / 'report.html'}", f"        {tmp_path / 'o' / 'report.md'}"]


def test_gpt2bench_report_front(tmp_path):
    binary = ROOT / "build" / "gpt2bench"
    if not binary.exists():
        pytest.skip("no build/gpt2bench")
    r = subprocess.run([str(binary), "report", str(FIXTURES / "cpu_2threads"), str(FIXTURES / "cpu_1thread"),
                        "--out", str(tmp_path / "cmp")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "cmp" / "report.html").exists() and "report:" in r.stdout
    r = subprocess.run([str(binary), "report", str(tmp_path / "missing"), "--out", str(tmp_path / "x")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and "missing: no such run directory" in r.stderr


def test_multi_line_errors_keep_tables_one_line_and_the_run_is_partial(tmp_path):
    # A copy of a fixture with one rung failed as on the H100 (a CUDA error runs over several lines).
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURES / "cpu_2threads", run_dir)
    doc = json.loads((run_dir / "rungs.json").read_text())
    failed = doc["rungs"][-1]
    failed["status"] = "error"
    failed["error"] = ("CUDA graph capture failed: CUDA error: operation not permitted when stream is capturing\n"
                       "CUDA kernel errors might be asynchronously reported | at some other API call")
    failed.pop("median", None)
    doc["status"] = "complete"  # what gpt2bench wrote before it knew "partial"
    (run_dir / "rungs.json").write_text(json.dumps(doc))
    run = load_run(run_dir)
    assert run.status == "partial"
    row = {r[0]: r for r in ladder_table(run)[1:]}[failed["name"]]
    # The error's first line alone: the variants skipped below this rung have their reasons on their own rows.
    assert row[9] == "CUDA graph capture failed: CUDA error: operation not permitted when stream is capturing"[:59] + "…"
    assert (f"{failed['name']} (error): CUDA graph capture failed: CUDA error: operation not permitted when stream is "
            "capturing") in run_notes(run)
    out = write_report([run], tmp_path / "report")
    md = (out / "report.md").read_text()
    for line in md.splitlines():
        if line.startswith("| "):  # every table row is one line with as many cells as its header
            assert len(re.findall(r"(?<!\\)\|", line)) in {14, 13, 10, 6}, line
    tables, details = md.split("<details><summary>Full error texts</summary>")
    assert "asynchronously" not in tables  # only the first line in the table ...
    details = details.split("</details>")[0]  # ... the whole text, verbatim, in the details block under it
    assert f"{failed['name']}:\n\n```\n{failed['error']}\n```" in details
    html_text = (out / "report.html").read_text()
    assert "<details><summary>Full error texts</summary>" in html_text
    assert "CUDA kernel errors might be asynchronously reported | at some other API call</pre>" in html_text


def test_a_power_capped_rung_is_noted_not_throttled(tmp_path):
    # NVML's clocks as gpt2bench writes them for a dense step at an H100's 700 W limit (bench/measure/clocks.cpp).
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURES / "cpu_2threads", run_dir)
    doc = json.loads((run_dir / "rungs.json").read_text())
    ok = [r for r in doc["rungs"] if r["status"] == "ok"]
    ok[0]["clocks"] = {"available": True, "throttled": False, "sm_mhz_median": 1620.0, "max_sm_mhz": 1980.0,
                       "power_capped_share": 0.8, "uncapped_sm_mhz_median": 1980.0, "reasons": ["sw_power_cap"]}
    ok[1]["clocks"] = {"available": True, "throttled": False, "sm_mhz_median": 1980.0, "max_sm_mhz": 1980.0,
                       "power_capped_share": 0.1, "uncapped_sm_mhz_median": 1980.0, "reasons": ["sw_power_cap"]}
    (run_dir / "rungs.json").write_text(json.dumps(doc))
    run = load_run(run_dir)
    rows = {r[0]: r for r in ladder_table(run)[1:]}
    assert rows[ok[0]["name"]][1] == "ok"
    md = (write_report([run], tmp_path / "report") / "report.md").read_text()
    assert "THROTTLED" not in md
    assert "At the power limit while timed" in md
    assert f"{ok[0]['name']} (80%, SM clock 1620 of 1980 MHz)" in md
    assert f"{ok[1]['name']} (" not in md.split("At the power limit")[1].split("\n")[0]  # 10% of its samples only


def test_a_rung_that_lost_the_device_is_noted(tmp_path):
    # A rung as gpt2bench ladder records a kernel's fault that lost the device (bench/ladder/lost_device.cpp), the
    # rungs after it run by --resume in a new process.
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURES / "cpu_2threads", run_dir)
    doc = json.loads((run_dir / "rungs.json").read_text())
    lost = [r for r in doc["rungs"] if r["status"] == "ok"][1]
    lost.update(status="error", device_fault=True,
                error="CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be "
                      "asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n")
    for k in ("median", "repetitions", "spread"):
        lost.pop(k, None)
    (run_dir / "rungs.json").write_text(json.dumps(doc))
    run = load_run(run_dir)
    md = (write_report([run], tmp_path / "report") / "report.md").read_text()
    assert (f"{lost['name']} lost the device (CUDA error: an illegal memory access was encountered): a kernel's fault "
            "loses the process's CUDA context") in md
    assert md.count("lost the device") == 1  # the other rungs: none


def test_a_rung_a_process_ended_in_is_noted(tmp_path):
    # As gpt2bench ladder --resume records a rung its process ended in (bench/ladder/run_dir.cpp): run again after one
    # such end, an error after two.
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURES / "cpu_2threads", run_dir)
    doc = json.loads((run_dir / "rungs.json").read_text())
    again, given_up = [r for r in doc["rungs"] if r["status"] == "ok"][1:3]
    again["ended_processes"] = 1
    given_up.update(status="error", ended_processes=2,
                    error="its process ended during this rung 2 times, recording nothing (a crash, or a kill it could "
                          "not stop for: the ladder's log says which); --resume does not run it again")
    for k in ("median", "repetitions", "spread"):
        given_up.pop(k, None)
    (run_dir / "rungs.json").write_text(json.dumps(doc))
    md = (write_report([load_run(run_dir)], tmp_path / "report") / "report.md").read_text()
    assert (f"{again['name']}: a process ended during it recording nothing (a crash, or a kill it could not stop for: "
            "the ladder's log says which); it ran again in a new one") in md
    assert f"| {given_up['name']} | error |" in md and "| its process ended during this rung 2 times" in md  # the table
    assert md.count("recording nothing") == 2  # the note, the table's error; the other rungs: none


def test_mfu_basis_spread_throttling_and_emulated_bf16_are_explained(tmp_path):
    # A copy of a fixture as a newer gpt2bench writes it: the MFU's basis, the spread, NVML's clocks.
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURES / "cpu_2threads", run_dir)
    doc = json.loads((run_dir / "rungs.json").read_text())
    doc["mfu"] = {"basis": "the highest matmul rate measured on this CPU in any precision, 12.0 GFLOP/s (fp32)"}
    doc["device"]["bf16_support"] = "emulated (no AMX-BF16 or AVX512-BF16: ...)"
    ok = [r for r in doc["rungs"] if r["status"] == "ok"]
    ok[0]["spread"] = {"tokens_per_sec_ci": [100.0, 120.0], "ci_level": 0.9375, "cv": 0.05}
    ok[1]["clocks"] = {"available": True, "throttled": True,
                       "throttled_why": "median SM clock 1410 MHz is 71% of the 1980 MHz maximum"}
    ok[2]["median"]["mfu"] = None  # an unknown GPU: no datasheet MFU
    ok[2]["sdpa_choice"] = {"chosen": "cudnn", "pytorch_choice": "flash", "margin": 0.01,
                            "tries": [{"backend": "flash", "ms": 1.25}, {"backend": "cudnn", "ms": 1.1},
                                      {"backend": "math", "why": "No available kernel. Aborting execution."}]}
    ok[3]["sdpa_choice"] = dict(ok[2]["sdpa_choice"], timed_for=ok[2]["name"])  # the same attention, timed once
    ok[3]["kind"] = "kept"
    ok[3]["kept"] = [{"variant": "fused_classifier", "kept": True, "ratio": 1.04, "why": "faster than 11_top (1.040x)"},
                     {"variant": "fused_residual_norm", "kept": False, "ratio": 0.99,
                      "why": "not faster than 11_top (0.990x)"}]
    ok[2]["classifier_chunk_choice"] = {"chosen": 4096, "tries": [{"chunk": 1024, "ms": 9.5}, {"chunk": 4096, "ms": 8.25},
                                                                  {"chunk": 8192, "why": "CUDA error: out of memory\nmore"}]}
    ok[3]["classifier_chunk_choice"] = dict(ok[2]["classifier_chunk_choice"], timed_for=ok[2]["name"])
    ok[1]["kind"] = "control"  # 00_baseline timed again (its compare_to): 32,741 over 32,292 tok/s
    ok[4].update(kind="kept", ties=True, compare_to=ok[3]["name"],  # the kept rung again with what tied the top
                 kept=ok[3]["kept"] + [{"variant": "adamw_one_launch", "kept": True, "tie": True, "ratio": 1.0,
                                        "why": "not measurably faster than 11_top (1.000x); not measurably slower "
                                               "either: a tie"}])
    (run_dir / "rungs.json").write_text(json.dumps(doc))
    run = load_run(run_dir)
    rows = {r[0]: r for r in ladder_table(run)[1:]}
    assert rows[ok[0]["name"]][11] == "100-120 (93.8%)"
    assert rows[ok[0]["name"]][12] == "5.0%"
    assert rows[ok[1]["name"]][1] == "ok (throttled)"
    assert rows[ok[2]["name"]][7] == "-"
    md = (write_report([run], tmp_path / "report") / "report.md").read_text()
    assert "over the highest matmul rate measured on this CPU in any precision" in md
    assert "Mann-Whitney U" in md and "order statistics" in md
    assert "bf16 on this CPU is emulated" in md
    assert f"{ok[1]['name']} was THROTTLED while timed: median SM clock 1410 MHz" in md
    assert "At the power limit" not in md  # no rung was
    # the two choices as rungs.json held them before its generic `choices` (2026-11-27), read as that list
    # a timing said once, with the rungs that took it; a candidate that could not run by its error's gist
    assert (f"{ok[2]['name']} cudnn (flash 1.25, cudnn 1.1; math: No available kernel.; without the choice: flash, "
            f"kept unless another is faster by more than 1%), and so {ok[3]['name']} (the same attention).") in md
    assert (f"{ok[3]['name']}: the top with every extra that beat it in this run, settled as it started: "
            "fused_classifier kept (fused_classifier: faster than 11_top (1.040x); fused_residual_norm: not faster "
            "than 11_top (0.990x)).") in md
    assert (f"{ok[1]['name']}: 00_baseline timed again after the extras, 1.014x its first timing (within noise, U test "
            "p=") in md
    assert "An extra joins the kept rungs only if faster than both timings." in md
    # the ties: in their rung's note, and in Findings beside (not among) the kept extras, with what they gave
    gain = ok[4]["median"]["tokens_per_sec"] / ok[3]["median"]["tokens_per_sec"]
    assert (f"**Kept**: fused_classifier; with the ties (adamw_one_launch) at batch {ok[4]['spec']['batch']}: "
            f"{gain:.2f}x {ok[3]['name']}.") in md
    assert (f"{ok[4]['name']}: the top with every extra that beat it in this run or tied it (not measurably slower "
            "than either timing of it), settled as it started: fused_classifier, adamw_one_launch (a tie) kept") in md
    assert (f"{ok[2]['name']} 4096 (1024 9.5, 4096 8.25; 8192: CUDA error: out of memory), and so {ok[3]['name']} "
            "(the same head).") in md


def test_kept_rungs_with_the_same_reasons_say_them_once(tmp_path):
    # top+kept and planned_batch+kept settle the extras once, as the run started: the second names the first
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURES / "cpu_2threads", run_dir)
    doc = json.loads((run_dir / "rungs.json").read_text())
    kept = [{"variant": "fused_classifier", "kept": False, "ratio": 0.98, "why": "not faster than 03_fused_adamw"}]
    for r in doc["rungs"][4:]:
        r.update(kind="kept", kept=kept)
    (run_dir / "rungs.json").write_text(json.dumps(doc))
    notes = run_notes(load_run(run_dir))
    first, second = (n for n in notes if "settled as it started" in n)
    assert first.endswith("none kept (fused_classifier: not faster than 03_fused_adamw).")
    assert second == (f"{doc['rungs'][5]['name']}: the top with every extra that beat it in this run, settled as it "
                      f"started: none kept (each extra's reason as for {doc['rungs'][4]['name']}).")


def test_reference_rungs_and_flop_shares_are_reported_beside_the_ladder(tmp_path):
    # rungs.json's references as gpt2bench writes them (one ok, one failed), and the FLOP shares.
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURES / "cpu_2threads", run_dir)
    doc = json.loads((run_dir / "rungs.json").read_text())
    base = doc["rungs"][0]
    base.setdefault("flops", {})["shares"] = {"blocks": 0.639, "lm_head": 0.29, "attention": 0.071}
    doc["references"] = [
        {"name": "ref_torch_eager", "status": "ok", "config": {"batch": 4}, "compared_with": base["name"],
         "cpp_tokens_per_sec": 1200.0, "ratio": 1.2, "parity": {"verdict": "pass"},
         "ratio_interval": {"estimate": 1.2, "low": 1.1, "high": 1.31, "level": 0.961},
         "again": {"rung": base["name"], "cpp_tokens_per_sec": 1150.0, "ratio": 1.15,
                   "ratio_interval": {"estimate": 1.15, "low": 1.05, "high": 1.22, "level": 0.961}},
         "clocks": {"available": True, "sm_mhz_median": 1980.0, "power_capped_share": 0.0, "throttled": False},
         "result": {"tokens_per_sec": 1000.0, "first_step_s": 0.5, "torch_version": "2.13.0+cpu"}},
        {"name": "ref_torch_compile", "status": "ok", "config": {"batch": 8}, "compared_with": base["name"],
         "cpp_tokens_per_sec": 1200.0, "ratio": 1.2, "again": {"rung": base["name"], "error": "not finished: interrupted"},
         "compile_scope_clocks": {"model": {"available": True, "sm_mhz_median": 1980.0, "power_capped_share": 0.0},
                                  "model_and_loss": {"available": True, "sm_mhz_median": 1755.0,
                                                     "power_capped_share": 1.0}},
         "result": {"tokens_per_sec": 1000.0, "first_step_s": 30.0, "torch_version": "2.13.0+cpu",
                    "compile_scope": "model_and_loss", "inductor_fx_graph_cache": {"hits": 1, "misses": 2},
                    "compile_scopes": {"model": {"tokens_per_sec": 950.0}, "model_and_loss": {"tokens_per_sec": 1000.0}}}},
        # paired timing (its repetitions alternating with the C++ rung's): the pairs' ratio, the ladder's timing beside
        {"name": "ref_torch_compile", "status": "ok", "config": {"batch": 32}, "compared_with": base["name"],
         "cpp_tokens_per_sec": 1200.0, "ratio": 1.25, "python_tokens_per_sec": 955.0,
         "ratio_interval": {"estimate": 1.25, "low": 1.21, "high": 1.3, "level": 0.961, "method": "paired: ..."},
         "first_timing": {"cpp_tokens_per_sec": 1300.0, "ratio": 1.35,
                          "ratio_interval": {"estimate": 1.35, "low": 1.3, "high": 1.4, "level": 0.961}},
         "again": {"rung": base["name"], "cpp_tokens_per_sec": 1200.0, "ratio": 1.25, "paired": {}},
         "passed_over": [{"rung": "13_top+fused_residual_norm", "cpp_tokens_per_sec": 1500.0, "why": "failed parity"},
                         {"rung": "15_top+fp16_autocast", "cpp_tokens_per_sec": 1400.0,
                          "why": "fp16 matmuls, the reference's bf16"},
                         {"rung": "17_top+gelu_epilogues", "cpp_tokens_per_sec": 1300.0, "why": "failed parity"}],
         "result": {"tokens_per_sec": 960.0, "first_step_s": 3.0, "torch_version": "2.13.0+cpu", "compile_scope": "model",
                    "inductor_fx_graph_cache": {"hits": 2, "misses": 0},
                    "compile_scopes": {"model": {"tokens_per_sec": 960.0},
                                       "model_and_loss": {"error": "OutOfMemoryError: CUDA out of memory."}}}},
        {"name": "ref_torch_compile", "status": "error", "config": {"batch": 4},
         "error": "python3 gpt2bench_ref.py: exit code 1: InvalidCxxCompiler: No working C++ compiler found"},
        {"name": "ref_torch_compile", "status": "interrupted", "config": {"batch": 16},
         "error": "not finished: interrupted (--resume runs it again)"},
    ]
    (run_dir / "rungs.json").write_text(json.dumps(doc))
    run = load_run(run_dir)
    md = (write_report([run], tmp_path / "report") / "report.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| ref_torch_eager"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells == ["ref_torch_eager", "4", "ok", "1,000", base["name"], "1,200", "1.20x", "1.10-1.31x (96%)",
                     "1.15x; 1.05-1.22x (96%) (timed again after it)", "pass", "0.5", "2.13.0+cpu"]
    assert f"| ref_torch_compile | 8 | ok | 1,000 | {base['name']} | 1,200 | 1.20x | - | not finished: interrupted |" in md
    assert "| ref_torch_compile | 4 | error: python3 gpt2bench_ref.py: exit code 1: InvalidCxxCompiler" in md
    # a faster rung whose parity failed, or of another matmul format, is not what a reference is held against, and
    # the table says so, a clause a reason
    assert (f"| ref_torch_compile | 32 | ok | 955 | {base['name']} (not 13_top+fused_residual_norm, "
            "17_top+gelu_epilogues: failed parity; not 15_top+fp16_autocast: fp16 matmuls, the reference's bf16) "
            "| 1,200 | 1.25x | 1.21-1.30x (96%, paired) | 1.35x; 1.30-1.40x (96%) (first, the ladder's) |") in md
    # Findings: the fastest rung it is not held against beside the ratio
    assert (f"{base['name']} 1.25x (1.21-1.30x, paired) ref_torch_compile at B=32 (not 13_top+fused_residual_norm: "
            "failed parity)") in md
    # where inductor took its graphs from a cache an earlier process warmed, the first step says so
    assert "| 3.0 (graphs from the cache) | 2.13.0+cpu |" in md
    assert "| 30.0 (1 of 3 graphs from the cache) | 2.13.0+cpu |" in md
    assert "| ref_torch_compile | 16 | not finished: interrupted (--resume runs it again) | - |" in md  # not an error
    assert "blocks' weight matmuls 63.9%, LM head 29.0%, causal attention 7.1%" in md
    assert ("the model returning its loss (nanoGPT's; the loss inside the graph): ref_torch_compile at batch 8: "
            "model 950 tok/s, model_and_loss 1,000 tok/s (model_and_loss taken); ref_torch_compile at batch 32: "
            "model 960 tok/s, model_and_loss failed (OutOfMemoryError: CUDA out of memory.) (model taken).") in md
    assert "cards of one model" not in md  # one card (here none: a CPU)
    # NVML's clocks over each reference's timed steps, each compiled form's over its own; none sampled, none said
    assert ("each compiled form's over its own): ref_torch_eager at batch 4: 1980 MHz; ref_torch_compile at batch 8: "
            "model 1980 MHz, model_and_loss 1755 MHz (power-capped 100%).") in md

    # A run resumed on another machine (a lease is a fresh one): its cards named, its ratios said to be across them
    doc["cards"] = ["GPU-00112233-4455-6677-8899-aabbccddeeff", "GPU-ffeeddcc-bbaa-9988-7766-554433221100"]
    (run_dir / "rungs.json").write_text(json.dumps(doc))
    md = (write_report([load_run(run_dir)], tmp_path / "report2") / "report.md").read_text()
    assert ("this run was timed on 2 cards of one model (GPU-00112233-4455-6677-8899-aabbccddeeff, "
            "GPU-ffeeddcc-bbaa-9988-7766-554433221100; resumed on another machine): a reference may have run on "
            "another card than its C++ rung's first timing, whose ratio is then across cards; a paired ratio, or one "
            "timed again right after the reference, is one card's.") in md


def test_the_eager_gap_sets_each_reference_beside_its_cpp_rung_op_by_op(tmp_path):
    # The C++ rung's breakdown/<rung>.json and the reference's torch.profiler breakdown, as each is written.
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURES / "cpu_2threads", run_dir)
    doc = json.loads((run_dir / "rungs.json").read_text())
    base = doc["rungs"][0]["name"]
    (run_dir / "breakdown").mkdir()
    (run_dir / "breakdown" / f"{base}.json").write_text(json.dumps({
        "rung": base, "step_ms": 100.0, "host_ms_per_step": 95.0, "events_per_step": 1500.0,
        "by_name": [{"name": "aten::bmm", "count_per_step": 12.0, "ms_per_step": 20.0},
                    {"name": "aten::mm", "count_per_step": 33.0, "ms_per_step": 10.0},
                    {"name": "aten::copy_", "count_per_step": 20.0, "ms_per_step": 0.0},
                    {"name": "aten::empty", "count_per_step": 40.0, "ms_per_step": 0.0}]}))
    py = {"source": "torch.profiler", "events": "ATen ops", "steps": 2, "step_ms": 110.0, "host_ms_per_step": 101.5,
          "events_per_step": 2297.0,
          "by_name": [{"name": "aten::bmm", "count_per_step": 12.0, "ms_per_step": 20.1},  # within 0.5%: same
                      {"name": "aten::mm", "count_per_step": 33.0, "ms_per_step": 14.0},  # slower in Python
                      {"name": "aten::copy_", "count_per_step": 231.0, "ms_per_step": 0.0},  # issued more often
                      {"name": "aten::item", "count_per_step": 31.0, "ms_per_step": 2.0},  # Python's alone
                      {"name": "aten::empty", "count_per_step": 40.0, "ms_per_step": 0.0}]}
    doc["references"] = [{"name": "ref_torch_eager", "status": "ok", "config": {"batch": 4}, "compared_with": base,
                          "result": {"tokens_per_sec": 1000.0, "breakdown": py}},
                         {"name": "ref_torch_compile", "status": "ok", "config": {"batch": 4},  # no breakdown: none
                          "compared_with": base, "result": {"tokens_per_sec": 900.0}}]
    (run_dir / "rungs.json").write_text(json.dumps(doc))
    gaps = eager_gaps(load_run(run_dir))
    assert len(gaps) == 1
    title, rows = gaps[0]
    assert title.startswith(f"Eager gap: {base} (C++, its breakdown pass) beside ref_torch_eager (Python, torch.profiler)")
    assert "3 names differ" in title
    assert rows[1] == ["(all ATen ops; ms = the profiled step)", "1,500", "2,297", "100.00", "110.00", "+10.00"]
    # largest time difference first, then the largest count difference; equal and near-equal names left out
    assert rows[2] == ["(host time in the step's calls, unprofiled)", "", "", "95.00", "101.50", "+6.50"]
    assert [r[0] for r in rows[3:]] == ["aten::mm", "aten::item", "aten::copy_"]
    assert rows[4] == ["aten::item", "-", "31", "0.000", "2.000", "+2.000"]
    assert rows[5][1:3] == ["20", "231"]
    md = (write_report([load_run(run_dir)], tmp_path / "report") / "report.md").read_text()
    assert "**Eager gap: " in md and "| aten::item | - | 31 | 0.000 | 2.000 | +2.000 |" in md


def test_our_kernels_op_by_op_beside_what_the_step_kept(tmp_path):
    # The fixture's kernels.json, as `gpt2bench kernels` wrote it beside the ladder: a row for each thing each of
    # our ops replaces, its figures the file's.
    doc = json.loads((FIXTURES / "cpu_2threads" / "kernels.json").read_text())
    title, rows, notes = kernel_section(load_run(FIXTURES / "cpu_2threads"))
    assert title.startswith("Our kernels op by op (kernels.json: gpt2bench kernels, profile fixture-ladder, 5 rounds")
    assert rows[0][:6] == ["op (variant)", "shape", "ours ms", "against", "its ms", "ours Nx"]
    want = [(c, s, x) for c in doc["cases"] for s, x in zip(c["sides"][1:], c["speedup"])]
    assert [r[0] for r in rows[1:]] == [c["variant"] for c, _, _ in want]
    assert {r[0] for r in rows[1:]} == {"fused_residual_norm", "fused_gelu_backward", "gelu_epilogues", "fused_classifier"}
    for r, (c, s, x) in zip(rows[1:], want):
        assert r[2] == f"{c['sides'][0]['median_ms']:.3f}" and r[3] == s["name"] and r[4] == f"{s['median_ms']:.3f}"
        assert r[5] == f"{s['median_ms'] / c['sides'][0]['median_ms']:.2f}x"
        assert r[6] == f"{x['low']:.2f}-{x['high']:.2f}x ({100 * x['level']:.0f}%)"
        assert r[8] == "-"  # no top+kept rung in this ladder
    assert any("ATen references" in n for n in notes)  # a CPU's figures say nothing of a GPU

    # The verdict alone from the interval; the step's from the run's top+kept rung; a failed case and a note said.
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURES / "cpu_2threads", run_dir)
    k = json.loads((run_dir / "kernels.json").read_text())
    by = {c["variant"]: c for c in k["cases"]}
    by["fused_residual_norm"]["speedup"][0].update(low=1.2, high=1.5)
    by["fused_classifier"]["speedup"][0].update(low=0.5, high=0.9)
    by["fused_classifier"]["note"] = "fastest chunk: 64 tokens"
    gelu = by["fused_gelu_backward"]
    gelu["speedup"][0].update(low=0.9, high=1.1)
    k["cases"][k["cases"].index(by["gelu_epilogues"])] = {"variant": "gelu_epilogues", "error": "CUDA error: out of memory\nmore"}
    k["cases"].append({"variant": "fp8_linears", "skipped": "FP8 matmuls need a CUDA GPU of sm89+ (FP8 tensor cores)"})
    k["cases"].append({"variant": "fp8_linears", "alone": "quantize_fp8", "skipped": "FP8 matmuls need a CUDA GPU"})
    (run_dir / "kernels.json").write_text(json.dumps(k))
    rungs = json.loads((run_dir / "rungs.json").read_text())
    # fused_classifier's verdict as top+kept recorded it on the Zen 4 (cpu-amd-epyc-zen4/20261125-202720-cpu-scaled,
    # in git at abf8a13), its sentence long; the cell says it in figures
    zen4 = {"again": {"interval": {"high": 1.0317, "level": 0.968, "low": 0.9498}, "ratio": 0.9813, "rung": "22_top_again"},
            "compared_with": "12_batch_scaling", "interval": {"high": 0.9728, "level": 0.968, "low": 0.9336},
            "kept": False, "ratio": 0.9495, "rung": "17_top+fused_classifier", "variant": "fused_classifier",
            "why": "not measurably faster than 12_batch_scaling (0.949x; 0.934-0.973x at 97%) and than 22_top_again, "
                   "the top timed again after the extras (0.981x; 0.950-1.032x at 97%)"}
    rungs["rungs"][-1]["kept"] = [{"variant": "fused_residual_norm", "kept": True, "ratio": 1.04, "compared_with": "11_top"},
                                  zen4, {"variant": "fused_gelu_backward", "kept": False, "why": "it failed"}]
    (run_dir / "rungs.json").write_text(json.dumps(rungs))
    _, rows, notes = kernel_section(load_run(run_dir))
    first = {r[0]: r for r in reversed(rows[1:])}
    assert first["fused_residual_norm"][7:] == ["ours faster", "kept: 1.04x over 11_top"]
    assert first["fused_classifier"][7:] == [
        "ours slower", "not kept: 0.95x (0.93-0.97x) over 12_batch_scaling, 0.98x (0.95-1.03x) over 22_top_again"]
    assert first["fused_gelu_backward"][7:] == ["within noise", "not kept: it failed"]  # no ratio: its reason
    rungs["rungs"][-1]["kept"] = [zen4]
    (run_dir / "rungs.json").write_text(json.dumps(rungs))
    _, rows, notes = kernel_section(load_run(run_dir))
    first = {r[0]: r for r in reversed(rows[1:])}
    assert first["fused_gelu_backward"][7:] == ["within noise", "-"]
    assert first["gelu_epilogues"][2:] == ["-", "-", "-", "-", "-", "error: CUDA error: out of memory", "-"]
    assert first["fp8_linears"][1:] == ["-", "-", "-", "-", "-", "-",
                                        "skipped: FP8 matmuls need a CUDA GPU of sm89+ (FP8 tensor cores)", "-"]
    assert rows[-1][:2] == ["fp8_linears", "quantize_fp8 alone"]  # one of the variant's cases: which, named
    assert "fused_classifier: fastest chunk: 64 tokens" in notes
    md = (write_report([load_run(run_dir)], tmp_path / "report") / "report.md").read_text()
    assert "**Our kernels op by op (kernels.json: gpt2bench kernels" in md
    assert "| fused_classifier | " in md and "| ours slower | not kept: 0.95x (0.93-0.97x) over 12_batch_scaling, " in md
    assert not any("partial" in n for n in notes)

    # A command stopped before its end (a lent GPU's deadline) wrote "complete": false: said under both tables.
    k["complete"] = False
    k["gemms"] = [{"name": "qkv forward", "M": 8192, "N": 2304, "K": 768, "calls": 12, "tflops": [500.0, 520.0],
                   "sides": [{"name": "ATen: at::mm", "median_ms": 0.1}, {"name": "#0", "median_ms": 0.096}]}]
    (run_dir / "kernels.json").write_text(json.dumps(k))
    _, _, notes = kernel_section(load_run(run_dir))
    assert sum(n.startswith("kernels.json is partial: gpt2bench kernels was stopped") for n in notes) == 1
    _, _, gemm_notes = gemm_section(load_run(run_dir))
    assert gemm_notes[-1].endswith("the rest was not timed. The sums above cover the matmuls listed.")


def test_how_a_gpu_s_kernels_were_timed_is_said(tmp_path):
    # The committed H100 run's kernels.json predates graph replays: its small ops carry the host's launches.
    run_dir = tmp_path / "run"
    shutil.copytree(ROOT / "reports/reference/gpu-nvidia-h100-80gb-hbm3/20261127-030430-gpu-124m", run_dir)
    _, _, notes = kernel_section(load_run(run_dir))
    assert any(n.startswith("Timed eagerly (a kernels.json from before passes were replayed") for n in notes), notes
    k = json.loads((run_dir / "kernels.json").read_text())
    for c in k["cases"]:
        for s in c.get("sides", []):
            s["timed"] = "graph"
    k["cases"][3]["sides"][-1]["timed"] = "eager: CUDA graph capture failed: operation not permitted"
    (run_dir / "kernels.json").write_text(json.dumps(k))
    _, _, notes = kernel_section(load_run(run_dir))
    assert "Each side timed as replays of a CUDA graph of its pass: the device's time alone." in notes
    assert ("fused_classifier: 'ATen: linear, then cross_entropy' timed eagerly, its host's launches included "
            "(CUDA graph capture failed: operation not permitted).") in notes
    assert not any(n.startswith("Timed eagerly") for n in notes)


def _gemm(name, ms, **extra):
    """A kernels.json matmul entry (fc1's forward shape, 12 a step) whose sides took `ms`."""
    flops = 2 * 8192 * 3072 * 768
    return {"name": name, "M": 8192, "N": 3072, "K": 768, "calls": 12, "flops": flops,
            "sides": [{"name": f"side {i}", "timed": "graph", "median_ms": t, "ms": [t]} for i, t in enumerate(ms)],
            "tflops": [flops / (t * 1e9) for t in ms], "max_rel_diff": [0.0] * (len(ms) - 1), "failed": [], **extra}


def test_the_step_s_matmuls_against_cublaslt_s_heuristics(tmp_path):
    # kernels.json's gemms (a GPU's; the committed H100 kernels.json predates them): ATen's pick, the heuristic's
    # first and its fastest, and what ATen's picks cost the step. A CPU's says it was skipped: no section.
    assert gemm_section(load_run(FIXTURES / "cpu_2threads")) is None
    run_dir = tmp_path / "run"
    shutil.copytree(ROOT / "reports/reference/gpu-nvidia-h100-80gb-hbm3/20261127-030430-gpu-124m", run_dir)
    assert gemm_section(load_run(run_dir)) is None
    k = json.loads((run_dir / "kernels.json").read_text())
    k["gemms"] = [_gemm("fc1 forward", [0.060, 0.061, 0.050]),
                  dict(_gemm("fc1 dX", [0.050, 0.050]), failed=["cuBLASLt #1: algo 6 failed: not supported"]),
                  {"name": "head dW", "error": "CUBLAS_STATUS_NOT_SUPPORTED"}]
    (run_dir / "kernels.json").write_text(json.dumps(k))
    title, rows, notes = gemm_section(load_run(run_dir))
    assert title.startswith("The step's matmuls against cuBLASLt's heuristic algorithms")
    assert rows[1] == ["fc1 forward", "8192 x 3072 x 768", "12", "0.0600", "644", "634", "#1", "773", "1.20x"]
    assert rows[2][6:] == ["#0", "773", "1.00x"]
    assert rows[3][0] == "head dW" and rows[3][6] == "error: CUBLAS_STATUS_NOT_SUPPORTED"
    assert "The step's matmuls as ATen runs them: 1.32 ms a step; each at its fastest algorithm: 1.20 ms (0.12 ms, " \
           "9.1% less)." in notes
    assert "fc1 dX: cuBLASLt #1: algo 6 failed: not supported" in notes
    md = (write_report([load_run(run_dir)], tmp_path / "report") / "report.md").read_text()
    assert "**The step's matmuls against cuBLASLt's heuristic algorithms (kernels.json: gemms)**" in md


def test_a_reference_beside_its_rung_by_kind_of_work(tmp_path):
    # The committed H100 run's compile reference listed the optimizer's range on the device as a launch (1.37 ms,
    # beside the kernels it spans): not a row of the eager gap, not a launch. Runs since carry `category_ms`.
    run_dir = tmp_path / "run"
    shutil.copytree(ROOT / "reports/reference/gpu-nvidia-h100-80gb-hbm3/20261127-030430-gpu-124m", run_dir)
    run = load_run(run_dir)
    assert work_gaps(run) == [] and "by kind of work" not in " ".join(findings(run))
    gap = dict(eager_gaps(run))
    title = next(t for t in gap if "beside ref_torch_compile" in t)
    assert not any(row[0].startswith("Optimizer.step#") for row in gap[title])
    assert gap[title][1][:3] == ["(all kernel launches; ms = the profiled step)", "369", "551"]
    doc = json.loads((run_dir / "rungs.json").read_text())
    ref = next(r for r in doc["references"] if r["name"] == "ref_torch_compile" and r["config"]["batch"] == 8)
    ref["category_ms"] = {"cpp": {"matmul": 9.2, "normalization": 1.74, "loss": 0.83},
                          "python": {"matmul": 9.4, "normalization": 2.9, "loss": 1.85, "other": 0.5}}
    (run_dir / "rungs.json").write_text(json.dumps(doc))
    run = load_run(run_dir)
    [(title, rows)] = work_gaps(run)
    assert title.startswith("By kind of work: 24_planned_batch+kept beside ref_torch_compile at B=8")
    assert [r[0] for r in rows[1:]] == ["normalization", "loss", "other", "matmul", "(all)"]
    assert rows[1][1:] == ["1.740", "2.900", "+1.160"] and rows[-1][1:] == ["11.770", "14.650", "+2.880"]
    assert ("**Against torch.compile, by kind of work** (C++ vs Python, a step): 24_planned_batch+kept at B=8: "
            "normalization 1.74 vs 2.90 ms, loss 0.83 vs 1.85 ms, other 0.00 vs 0.50 ms.") in findings(run)
    md = (write_report([run], tmp_path / "report") / "report.md").read_text()
    assert "**By kind of work: 24_planned_batch+kept beside ref_torch_compile at B=8" in md
    # Where the findings are too many for their eight lines, this one gives way to what failed.
    doc["rungs"][3]["status"] = "error"
    (run_dir / "rungs.json").write_text(json.dumps(doc))
    lines = findings(load_run(run_dir))
    assert any(x.startswith("**Error**: 03_fused_adamw") for x in lines)
    assert not any("by kind of work" in x for x in lines)


def test_findings_name_each_parity_failure_with_what_it_was_judged_against(tmp_path):
    # A failed rung is never the fastest; Findings says what it was held to and how far off it was (the CPU's bf16
    # top at batch 16 on 2026-12-06: ATen's LayerNorm gradient sums, docs/measurement.md).
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURES / "cpu_2threads", run_dir)
    doc = json.loads((run_dir / "rungs.json").read_text())
    assert "Parity failed" not in " ".join(findings(load_run(run_dir)))
    doc["rungs"][4]["parity"].update(verdict="fail", against="baseline at batch 16", max_abs_dev=0.0612,
                                     grad_norm_ratio=1.0002, worst_param="blocks.1.ln1.shift", worst_param_ratio=0.712)
    doc["rungs"][5]["parity"].update(verdict="fail", against="04_native_layers", max_abs_dev=0.5)
    (run_dir / "rungs.json").write_text(json.dumps(doc))
    run = load_run(run_dir)
    assert ("**Parity failed** (docs/measurement.md: Parity): 04_native_layers against the baseline at batch 16: "
            "losses within 0.0612, first gradient 1.000x, blocks.1.ln1.shift 0.71x; 05_sdpa against 04_native_layers: "
            "losses within 0.5, first gradient 1.000x.") in findings(run)
    assert findings(run)[0].startswith("**Fastest**: 03_fused_adamw")  # not one that failed


def test_a_kernels_json_of_another_device_or_layout_is_refused(tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURES / "cpu_2threads", run_dir)
    k = json.loads((run_dir / "kernels.json").read_text())
    k["device"].update(name="NVIDIA H100 80GB HBM3", type="cuda")
    (run_dir / "kernels.json").write_text(json.dumps(k))
    with pytest.raises(ReportError, match=r"run/kernels\.json: timed on NVIDIA H100 80GB HBM3 \(cuda\), but the run on "
                                          r"AMD EPYC \(cpu\)"):
        load_run(run_dir)
    for spoil in (lambda k: k["cases"][0].pop("speedup"), lambda k: k["cases"][1]["sides"][0].update(median_ms=0),
                  lambda k: k.pop("device")):
        k = json.loads((FIXTURES / "cpu_2threads" / "kernels.json").read_text())
        spoil(k)
        (run_dir / "kernels.json").write_text(json.dumps(k))
        with pytest.raises(ReportError, match=r"run/kernels\.json: unexpected layout"):
            load_run(run_dir)
    (run_dir / "kernels.json").write_text("{")
    with pytest.raises(ReportError, match=r"run/kernels\.json: not valid JSON"):
        load_run(run_dir)
    (run_dir / "kernels.json").unlink()
    assert kernel_section(load_run(run_dir)) is None


def _synthetic_gpu_run(tmp_path, name, device, bandwidth, scale):
    """A GPU run made from the CPU fixture for the Generations test: SYNTHETIC (tiny-model tok/s scaled per
    rung; the device facts from the project's datasheet rows), labelled as such in its directory name."""
    run_dir = tmp_path / f"synthetic-{name}"
    shutil.copytree(FIXTURES / "cpu_2threads", run_dir)
    (run_dir / "kernels.json").unlink()  # timed on the fixture's CPU: refused beside another device's run
    doc = json.loads((run_dir / "rungs.json").read_text())
    doc["device"].update({"type": "cuda", "name": device, "sm_count": 132, "total_memory": 85 * 10**9,
                          "driver_version": "580.95", "runtime_version": "13.0",
                          "datasheet": {"model": name, "fp32_tflops": 67, "tf32_tflops": 494, "bf16_tflops": 989,
                                        "fp16_tflops": 989, "memory_bandwidth_gbs": bandwidth}})
    for r in doc["rungs"]:
        if r["status"] == "ok":
            r["median"]["tokens_per_sec"] *= scale.get(r["name"], 1.0)
    (run_dir / "rungs.json").write_text(json.dumps(doc))
    return run_dir


def test_generations_section_for_two_devices(tmp_path):
    # The section's shape, prices and "launch/host-bound" (no real pair of runs has one yet) on runs made up from
    # the CPU fixture; the real H100 and H200 runs' figures are the next test's.
    h100 = _synthetic_gpu_run(tmp_path, "H100 SXM", "NVIDIA H100 80GB HBM3", 3350, {})
    h200 = _synthetic_gpu_run(tmp_path, "H200 SXM", "NVIDIA H200", 4800,
                              {"00_baseline": 1.10, "03_fused_adamw": 1.22, "05_sdpa": 0.9})
    out = tmp_path / "report"
    assert main([str(h100), str(h200), "--out", str(out), "--price", "NVIDIA H200=3.5",
                 "--price", f"{h100.name}=2.5"]) == 0
    md = (out / "report.md").read_text()
    assert "## Generations" in md
    rows = {r.split("|")[1].strip(): [c.strip() for c in r.strip().strip("|").split("|")]
            for r in md.split("## Generations")[1].split("\n## ")[0].splitlines() if r.startswith("| 0")}
    assert rows["00_baseline"][3:] == ["1.10x", "1.00x, 1.43x", "compute-bound"]  # nearer 1.00 (fp32 peaks) than 1.43
    assert rows["03_fused_adamw"][3:] == ["1.22x", "1.00x, 1.43x", "memory-bound"]  # TF32 peaks equal too
    assert rows["05_sdpa"][3:] == ["0.90x", "1.00x, 1.43x", "launch/host-bound"]
    gen = md.split("## Generations")[1].split("\n## ")[0]
    facts = next(r for r in gen.splitlines() if r.startswith(f"| {h200.name} |"))
    assert "| datasheet (H200 SXM) | 989 | 494 | 67 | 4,800 | 1.00x | 1.43x |" in facts and "| 580.95 | 13.0 |" in facts
    assert "Peaks and bandwidth are datasheet figures" in gen
    cost = next(r for r in gen.splitlines() if r.startswith(f"| {h100.name} | NVIDIA H100 80GB HBM3 | 2.50 |"))
    assert cost.rstrip(" |").split("|")[-1].strip() != ""
    assert f"| {h200.name} | NVIDIA H200 | 3.50 |" in gen  # priced by its device's name
    for line in md.splitlines():  # no cell holds a newline (every row one line) or an unescaped |
        if line.startswith("| ") and "Generations" not in line:
            assert not re.search(r"[^\\ ]\|[^ \-]", line), line
    assert main([str(h100), "--out", str(out), "--price", "nonsense"]) == 2


def test_generations_of_the_committed_h100_and_h200_runs(tmp_path):
    # The two GPU generations as measured (ladders a week of commits apart): the same rungs line up by what they
    # are, whatever their numbers (the H200's ladder has five extras more), and read against the datasheets.
    h100 = ROOT / "reports/reference/gpu-nvidia-h100-80gb-hbm3/20261127-030430-gpu-124m"
    h200 = ROOT / "reports/reference/gpu-nvidia-h200/20261204-174111-gpu-124m"
    rows = {r[0]: r[1:] for r in generations_table([load_run(h100), load_run(h200)])[1:]}
    assert rows["00_baseline"] == ["34,104", "37,378", "1.10x", "1.00x, 1.43x", "compute-bound"]
    assert rows["02_tf32"] == ["60,724", "74,254", "1.22x", "1.00x, 1.43x", "memory-bound"]
    assert rows["23_top+kept / 28_top+kept"] == ["501,179", "537,877", "1.07x", "1.00x, 1.43x", "compute-bound"]
    assert rows["22_top+fp8_linears"] == ["-", "282,866", "-", "-", "-"]  # no FP8 rung in the H100's ladder
    assert "22_top_again / 27_top_again" in rows and "27_top_again" not in rows


def test_a_rung_is_set_against_the_peak_of_its_own_precision(tmp_path):
    # fp16 autocast over a TF32 step computes in fp16: its ratio is the fp16 peaks' (2x here), not TF32's (1x)
    h100 = _synthetic_gpu_run(tmp_path, "H100 SXM", "NVIDIA H100 80GB HBM3", 3350, {})
    h200 = _synthetic_gpu_run(tmp_path, "H200 SXM", "NVIDIA H200", 3350, {})
    for d, fp16 in ((h100, 989), (h200, 1978)):
        doc = json.loads((d / "rungs.json").read_text())
        doc["device"]["datasheet"]["fp16_tflops"] = fp16
        next(r for r in doc["rungs"] if r["name"] == "05_sdpa")["spec"]["precision"] = "fp16_autocast"
        (d / "rungs.json").write_text(json.dumps(doc))
    rows = {r[0]: r for r in generations_table([load_run(h100), load_run(h200)])[1:]}
    assert rows["05_sdpa"][4] == "2.00x, 1.00x"
    assert rows["03_fused_adamw"][4] == "1.00x, 1.00x"  # TF32 (a GPU's)


def _cpu_run(tmp_path, name, measured, fp32_rate, scale):
    """A CPU run made from the fixture under another device name, with the peaks it measured (`measured`: rungs.json's
    "measured", None for a run older than it) and each rung's fp32 matmul rate; tok/s scaled per rung."""
    run_dir = tmp_path / name.replace(" ", "_")
    shutil.copytree(FIXTURES / "cpu_2threads", run_dir)
    (run_dir / "kernels.json").unlink()  # timed on the fixture's CPU: refused beside another device's run
    doc = json.loads((run_dir / "rungs.json").read_text())
    doc["device"]["name"] = name
    doc.pop("measured", None)
    if measured is not None:
        doc["measured"] = measured
    for r in doc["rungs"]:
        r["peak_flops"]["measured_matmul"] = fp32_rate
        if r["status"] == "ok":
            r["median"]["tokens_per_sec"] *= scale.get(r["name"], 1.0)
    (run_dir / "rungs.json").write_text(json.dumps(doc))
    return run_dir


def test_generations_of_devices_without_a_datasheet_read_against_what_each_run_measured(tmp_path):
    # two CPUs: 2x the fp32 matmul rate, 1.25x the copy bandwidth
    a = _cpu_run(tmp_path, "CPU A", {"matmul_tflops": {"fp32": 0.2, "bf16": 0.9}, "copy_bandwidth_gbs": 20.0}, 0.2e12, {})
    b = _cpu_run(tmp_path, "CPU B", {"matmul_tflops": {"fp32": 0.4, "bf16": 1.5}, "copy_bandwidth_gbs": 25.0}, 0.4e12,
                 {"00_baseline": 1.9, "03_fused_adamw": 1.3, "05_sdpa": 0.8})
    old = _cpu_run(tmp_path, "CPU C", None, 0.3e12, {})  # before rungs.json had "measured": its rungs' rates only
    out = tmp_path / "report"
    assert main([str(a), str(b), str(old), "--out", str(out)]) == 0
    gen = (out / "report.md").read_text().split("## Generations")[1].split("\n## ")[0]
    rows = {r.split("|")[1].strip(): [c.strip() for c in r.strip().strip("|").split("|")]
            for r in gen.splitlines() if r.startswith("| 0")}
    assert rows["00_baseline"][4:7] == ["1.90x", "2.00x, 1.25x", "compute-bound"]
    assert rows["03_fused_adamw"][4:7] == ["1.30x", "2.00x, 1.25x", "memory-bound"]
    assert rows["05_sdpa"][4:7] == ["0.80x", "2.00x, 1.25x", "launch/host-bound"]
    assert rows["00_baseline"][7:] == ["1.00x", "1.50x, -", "-"]  # CPU C: no bandwidth, no reading
    facts = {r.split("|")[2].strip().split(" (")[0]: r for r in gen.splitlines() if r.startswith("| CPU_")}  # less "(bf16 ...)"
    assert "| measured | 1.5 | - | 0.4 | 25 | 1.67x | 1.25x |" in facts["CPU B"]
    assert "| measured | - | - | 0.3 | - | - | - |" in facts["CPU C"]  # fp32 from its rungs; no bf16 rung ran
    assert "what each run measured" in gen and "no copy bandwidth measured in CPU_C" in gen
    # a known GPU beside a CPU: one basis for both, the measured one (a datasheet against a measurement would not compare)
    h100 = _synthetic_gpu_run(tmp_path, "H100 SXM", "NVIDIA H100 80GB HBM3", 3350, {})
    assert main([str(h100), str(a), "--out", str(out)]) == 0
    gen = (out / "report.md").read_text().split("## Generations")[1].split("\n## ")[0]
    assert "datasheet (" not in gen and "| measured |" in gen


def test_cost_is_never_taken_at_an_anti_variant_rung(tmp_path):
    run_dir = _synthetic_gpu_run(tmp_path, "H100 SXM", "NVIDIA H100 80GB HBM3", 3350, {"05_sdpa": 100.0})
    doc = json.loads((run_dir / "rungs.json").read_text())
    fastest = max((r for r in doc["rungs"] if r["status"] == "ok"), key=lambda r: r["median"]["tokens_per_sec"])
    assert fastest["name"] == "05_sdpa"
    rows = cost_table([load_run(run_dir)], {run_dir.name: 2.5})
    assert rows[1][3] == "05_sdpa"
    fastest["anti_variant"] = True  # as rungs.json marks a sync_every_step rung: its tok/s above the rest is noise
    (run_dir / "rungs.json").write_text(json.dumps(doc))
    rows = cost_table([load_run(run_dir)], {run_dir.name: 2.5})
    assert rows[1][3] not in ("05_sdpa", "")


def test_cost_is_never_taken_at_a_rung_that_failed_parity(tmp_path):
    run_dir = _synthetic_gpu_run(tmp_path, "H100 SXM", "NVIDIA H100 80GB HBM3", 3350, {"05_sdpa": 100.0})
    doc = json.loads((run_dir / "rungs.json").read_text())
    fastest = max((r for r in doc["rungs"] if r["status"] == "ok"), key=lambda r: r["median"]["tokens_per_sec"])
    assert cost_table([load_run(run_dir)], {run_dir.name: 2.5})[1][3] == fastest["name"]
    fastest.setdefault("parity", {})["verdict"] = "fail"  # it trains something else: no cost of training GPT-2
    (run_dir / "rungs.json").write_text(json.dumps(doc))
    assert cost_table([load_run(run_dir)], {run_dir.name: 2.5})[1][3] not in (fastest["name"], "")


def test_committed_synthetic_gpu_runs_are_labelled_and_hold_the_quoted_figures(tmp_path):
    h100, h200 = load_run(FIXTURES / "synthetic_h100"), load_run(FIXTURES / "synthetic_h200")
    # The figures the GPUs gave (2026-11-22), as quoted in the issues; everything else in them is synthetic.
    assert h100.rung("00_baseline").tokens_per_sec == 34005 and h100.rung("11_vocab_padding").tokens_per_sec == 370827
    assert h200.rung("00_baseline").tokens_per_sec == 37300 and h200.rung("11_vocab_padding").tokens_per_sec == 389000
    assert h100.rung("12_batch_scaling").status == "error" and h100.status == "partial"
    out = tmp_path / "report"
    assert main([str(FIXTURES / "synthetic_h100"), str(FIXTURES / "synthetic_h200"), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert md.startswith("# gpt2bench report: NVIDIA H100 80GB HBM3 [synthetic_h100] (SYNTHETIC), NVIDIA H200 "
                         "[synthetic_h200] (SYNTHETIC)\n\n**SYNTHETIC input: synthetic_h100, synthetic_h200 are test "
                         "fixtures, not measurements")
    assert md.count("SYNTHETIC fixture, not a measurement") == 2  # each run's notes say what in it is made up
    assert "SYNTHETIC input" in (out / "report.html").read_text()
    gen = md.split("## Generations")[1].split("\n## ")[0]
    ratios = {r.split("|")[1].strip(): [c.strip() for c in r.strip().strip("|").split("|")][3]
              for r in gen.splitlines() if r.startswith("| 0") or r.startswith("| 1")}
    assert (ratios["00_baseline"], ratios["02_tf32"], ratios["11_vocab_padding"]) == ("1.10x", "1.22x", "1.05x")
    for name in ("run0_waterfall", "run1_waterfall", "run0_phases", "run1_phases"):  # what the issue asks of two devices
        assert (out / f"{name}.png").stat().st_size > 0 and f"({name}.png)" in md
    for line in md.splitlines():  # every table row one line, no unescaped | in a cell
        if line.startswith("| "):
            assert not re.search(r"[^\\ ]\|[^ \-]", line), line
    assert "CUDA kernel errors might be asynchronously reported" in md.split("<details>")[1]


def test_run_to_run_spread_over_runs_of_one_device(tmp_path):
    runs = []
    for k, scale in enumerate((1.0, 0.9, 1.2)):  # three runs of one device and profile, the same rungs
        d = tmp_path / f"run{k}"
        shutil.copytree(FIXTURES / "cpu_2threads", d)
        doc = json.loads((d / "rungs.json").read_text())
        for r in doc["rungs"]:
            if r["status"] == "ok":
                r["median"]["tokens_per_sec"] = 1000.0 * scale * (1 + int(r["name"][:2]))
        (d / "rungs.json").write_text(json.dumps(doc))
        runs.append(str(d))
    runs.append(str(FIXTURES / "cpu_1thread"))  # one thread: another "device", no group of its own
    out = tmp_path / "report"
    assert main(runs + ["--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert md.count("## Run-to-run spread") == 1
    section = md.split("## Run-to-run spread")[1].split("\n## ")[0]
    row = next(r for r in section.splitlines() if r.startswith("| 03_fused_adamw"))
    assert [c.strip() for c in row.strip().strip("|").split("|")][:5] + [c.strip() for c in row.split("|")[7:10]] == \
        ["03_fused_adamw", "3", "4,000", "3,600-4,800", "30.0%", "4,000", "3,600", "4,800"]
    assert not any(r.startswith("| 02_tf32") for r in section.splitlines())  # skipped in every run


REFERENCE_RUNS = sorted(p.parent for p in (ROOT / "reports" / "reference").glob("*/*/rungs.json"))


@pytest.mark.parametrize("run_dir", REFERENCE_RUNS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_committed_reference_runs_load_and_report(run_dir, tmp_path):
    # Runs from real machines, as the tool wrote them: still read by today's report, never synthetic, every
    # reference rung with its ratio and interval in the table.
    run = load_run(run_dir)
    assert not run.synthetic
    assert any(r.ok for r in run.rungs)
    md = (write_report([run], tmp_path / "report") / "report.md").read_text()
    for ref in run.references:
        if "ratio" in ref:
            ri = ref["ratio_interval"]
            assert f"| {ref['ratio']:.2f}x | {ri['low']:.2f}-{ri['high']:.2f}x" in md


def test_the_readmes_results_are_the_committed_runs_as_they_are():
    # The README's Results table: every cell is what the committed run's files give (findings.headline), so the front
    # page cannot quote a figure the run does not hold.
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Results")[1].split("\n## ")[0]
    rows = [r for r in section.splitlines() if r.startswith("| ") and "`" in r]
    assert len(rows) >= 4
    for row in rows:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        run = load_run(ROOT / "reports" / "reference" / cells[1].strip("`"))
        assert cells == headline(run), row


def test_a_top_timed_again_at_another_batch_is_not_drift():
    # The H100's run 20261126-210951: 22_top_again ran out of memory at 12_batch_scaling's batch 64 (memory left
    # behind by earlier rungs) and ran at 32; its 1.06x over 12_batch_scaling is the batch's, not the machine's drift.
    run = load_run(ROOT / "reports" / "reference" / "gpu-nvidia-h100-80gb-hbm3" / "20261126-210951-gpu-124m")
    again, top = run.rung("22_top_again"), run.rung("12_batch_scaling")
    assert (again.batch, top.batch) == (32, 64)
    assert differs(top.rep_tokens_per_sec, again.rep_tokens_per_sec)[0]
    assert "22_top_again" not in [w for w, _, _ in drifts(run)]


def test_a_skipped_rung_gives_its_own_reason_once():
    # A Zen 3 run: each skipped rung's row says why it did not run, its own variant's reason, not again the reasons
    # of the skipped variants below it (in its cpu-mini run of 11-25, 13_ddp had repeated tf32's, pinned_memory's and
    # cuda_graph's), and a reason its error already gives is not said twice.
    run = load_run(ROOT / "reports" / "reference" / "cpu-amd-epyc-zen3" / "20261202-065802-cpu-scaled")
    why = {r.name: rung_why(r) for r in run.rungs if r.status == "skipped"}
    reasons = {s["variant"]: s["reason"] for r in run.rungs for s in r.skipped}
    assert why["13_ddp"].startswith("the same step as 12_batch_scaling here (skipped here: tf32, pinned_memory,")
    assert why["13_ddp"].endswith("; ddp: " + reasons["ddp"])
    assert why["02_tf32"].endswith("; tf32: " + reasons["tf32"])
    for name, text in why.items():
        assert all(text.count(reason) <= 1 for reason in reasons.values()), name
        own = run.rung(name).variant
        assert [v for v in reasons if reasons[v] in text and v != own] == [], name
    assert why["15_top+fp16_autocast"] == "fp16_autocast does not run here: " + reasons["fp16_autocast"]
    assert why["28_top+kept"] == "no extra beat the top rung in this run (rungs.json: kept)"


def test_committed_runs_of_two_cpus_side_by_side(tmp_path):
    # Two real machines (an AMD EPYC with AVX512-BF16, an Intel Xeon with AMX-BF16): neither has a datasheet, so
    # each rung is set against the matmul rates the two runs measured in its precision; the AMD run is older than
    # the copy bandwidth's measurement, so no bandwidth ratio and no reading, and the notes say so.
    amd = ROOT / "reports" / "reference" / "cpu-amd-epyc" / "20261124-214036-cpu-scaled"
    intel = ROOT / "reports" / "reference" / "cpu-intel-xeon" / "20261204-140959-cpu-scaled"
    out = tmp_path / "report"
    assert main([str(amd), str(intel), "--out", str(out)]) == 0
    gen = (out / "report.md").read_text().split("## Generations")[1].split("\n## ")[0]
    a, b = load_run(amd), load_run(intel)
    assert b.measured["copy_bandwidth_gbs"] > 0 and not a.measured
    rows = {r.split("|")[1].strip(): [c.strip() for c in r.strip().strip("|").split("|")]
            for r in gen.splitlines() if r.startswith("| 0") or r.startswith("| 1")}
    for name in ("00_baseline", "05_bf16_cast"):  # fp32, then bf16: each its own precision's measured rates
        ra, rb = a.rung(name), b.rung(name)
        assert rows[name][3:] == [f"{rb.tokens_per_sec / ra.tokens_per_sec:.2f}x",
                                  f"{rb.measured_matmul / ra.measured_matmul:.2f}x, -", "-"]
    assert rows["00_baseline"][4] != rows["05_bf16_cast"][4]
    assert "| measured |" in gen and f"no copy bandwidth measured in {amd.name}" in gen


def test_two_cpus_of_one_name_are_two_devices(tmp_path):
    # A hypervisor names a Zen 5 (AVX512-BF16) and a Zen 3 (AVX2, bf16 emulated) EPYC both "AMD EPYC": merged as one
    # device they made a "run-to-run spread" of 196% out of two CPUs' difference and no Generations section. Their
    # committed runs are two devices (their bf16 support differs), named apart, set side by side.
    zen5 = ROOT / "reports" / "reference" / "cpu-amd-epyc" / "20261124-214036-cpu-scaled"
    zen3 = ROOT / "reports" / "reference" / "cpu-amd-epyc-zen3" / "20261125-120524-cpu-scaled"
    a, b = load_run(zen5), load_run(zen3)
    assert a.device["name"] == b.device["name"] == "AMD EPYC"
    assert not same_device(a, b) and len(device_groups([a, b])) == 2
    assert (a.device_name, b.device_name) == ("AMD EPYC (AVX512-BF16)", "AMD EPYC (bf16 emulated)")
    out = tmp_path / "report"
    assert main([str(zen5), str(zen3), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "## Run-to-run spread" not in md and "## Generations" in md
    gen = md.split("## Generations")[1].split("\n## ")[0]
    row = next(r for r in gen.splitlines() if r.startswith("| 06_native_layers"))
    # 226 against 26,515 tok/s, beside an emulated bf16 GEMM at 0.00096x the native one's: digits kept, not "0.00x"
    assert [c.strip() for c in row.strip().strip("|").split("|")][3:5] == ["0.0085x", "0.00096x, -"]

    # The family and model, where runs record them (since 2026-11-25), part the CPUs the flags do not: a Zen 4 and
    # a Zen 5 both have AVX512-BF16. A run without them (older) stays one device with either.
    def cpu(model_id):
        run = load_run(zen5)
        if model_id:
            run.device = dict(run.device, cpu_model_id=model_id)
        return run

    zen4, zen5_new, old = cpu("family 25 model 17 stepping 1"), cpu("family 26 model 2 stepping 1"), cpu(None)
    assert not same_device(zen4, zen5_new) and same_device(old, zen5_new) and same_device(zen5_new, cpu("family 26 model 2 stepping 1"))
    assert zen4.device_name == "AMD EPYC (family 25 model 17 stepping 1, AVX512-BF16)"
    assert [len(g) for g in device_groups([zen5_new, zen4, old])] == [2, 1]


def test_a_device_ratio_reads_against_the_nearest_peak_ratio_in_factors():
    assert times(1.234) == "1.23x" and times(0.0085) == "0.0085x" and times(0.000964) == "0.00096x"
    assert bound_by(1.10, 1.00, 1.43) == "compute-bound"
    assert bound_by(1.30, 2.00, 1.25) == "memory-bound"
    assert bound_by(0.80, 2.00, 1.25) == "launch/host-bound"
    # 0.013x is 24x off a 0.00054x compute ratio and 52x off a 0.68x bandwidth ratio: nearest compute, by far neither
    assert bound_by(0.013, 0.00054, 0.68) == "neither (2x+ off both)"
    # in factors, not differences: 0.3x is 1.5x off 0.2x and 2.7x off 0.8x (0.1 and 0.5 apart)
    assert bound_by(0.3, 0.2, 0.8) == "compute-bound"
    assert bound_by(0.5, 0.2, 0.8) == "memory-bound"  # 2.5x off 0.2, 1.6x off 0.8 (0.3 from both)


def test_bad_report_input_is_one_line_exit_1_and_leaves_nothing_behind(tmp_path, capsys):
    def fails(args, needle):
        out = tmp_path / "out"
        assert main([str(a) for a in args] + ["--out", str(out)]) == 1
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1 and "Traceback" not in err, err
        assert not out.exists()

    listed = tmp_path / "listed"
    shutil.copytree(FIXTURES / "cpu_2threads", listed)
    (listed / "results.json").write_text("[]")
    fails([listed], "results.json: unexpected layout (a JSON list, where gpt2bench writes an object)")
    fast = tmp_path / "fast"
    shutil.copytree(FIXTURES / "cpu_2threads", fast)
    doc = json.loads((fast / "rungs.json").read_text())
    doc["rungs"][0]["median"]["tokens_per_sec"] = "fast"
    (fast / "rungs.json").write_text(json.dumps(doc))
    fails([fast], "rung 00_baseline's median tokens_per_sec is \"fast\", not a finite number")
    doc["rungs"][0]["median"]["tokens_per_sec"] = float("nan")  # Python's json writes NaN; no check may pass it
    (fast / "rungs.json").write_text(json.dumps(doc))
    fails([fast], "rung 00_baseline's median tokens_per_sec is NaN, not a finite number")
    doc["rungs"] = 5
    (fast / "rungs.json").write_text(json.dumps(doc))
    fails([fast], "rungs.json: its rungs are 5, not a list")
    fails([FIXTURES / "cpu_2threads", tmp_path / ".." / tmp_path.name / "listed" / ".." / ".." / tmp_path.name /
           "fast", FIXTURES / "cpu_2threads"], "given twice")
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    assert main([str(FIXTURES / "cpu_2threads"), "--out", str(a_file)]) == 1
    assert f"--out {a_file}: a file, not a directory" in capsys.readouterr().err
    assert main([str(FIXTURES / "cpu_2threads"), "--out", "/proc/no/such/place"]) == 1
    assert "--out /proc/no/such/place: cannot write there" in capsys.readouterr().err


def test_a_running_run_whose_process_is_gone_reads_as_ended_unfinished(tmp_path):
    import fcntl
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURES / "cpu_2threads", run_dir)
    doc = json.loads((run_dir / "rungs.json").read_text())
    doc["status"] = "running"
    (run_dir / "rungs.json").write_text(json.dumps(doc))
    assert load_run(run_dir).status == "running"  # no lock file: a run from before the lock, as written
    (run_dir / ".lock").write_text("pid 1 on elsewhere\n")
    assert load_run(run_dir).status.startswith("ended unfinished (its process is gone")
    with open(run_dir / ".lock") as held:  # as gpt2bench ladder holds it while it runs (RunLock)
        fcntl.flock(held, fcntl.LOCK_EX)
        assert load_run(run_dir).status == "running"


def test_mfu_over_a_peak_measured_low_is_flagged_not_shown(tmp_path):
    # A run older than the ladder's peak check, its peak measured on a busy machine: MFU 124%, 1.53x the measured.
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURES / "cpu_2threads", run_dir)
    doc = json.loads((run_dir / "rungs.json").read_text())
    top = [r for r in doc["rungs"] if r["status"] == "ok"][-1]
    top["median"].update(mfu=1.24, mfu_vs_measured_peak=1.53)
    (run_dir / "rungs.json").write_text(json.dumps(doc))
    run = load_run(run_dir)
    assert run.unreliable_peaks and "1.53x" in next(iter(run.unreliable_peaks.values()))
    assert {row[7] for row in ladder_table(run)[1:] if row[1].startswith("ok")} == {"?"}
    md = (write_report([run], tmp_path / "report") / "report.md").read_text()
    assert "MFU not shown" in md and f"MFU over 100% ({top['name']})" in md and "124.0%" not in md
    assert not (tmp_path / "report" / "mfu.png").exists()  # no bar shows what the tables mark "?"
    # As the ladder writes it now: the peak raised to the rate achieved, flagged in rungs.json.
    top["median"].update(mfu=0.9, mfu_vs_measured_peak=1.0)
    doc.setdefault("measured", {})["unreliable"] = {"fp32": {"why": "measured below a rate 05_sdpa achieved (a busy machine?)"}}
    (run_dir / "rungs.json").write_text(json.dumps(doc))
    run = load_run(run_dir)
    assert run.unreliable_peaks == {"fp32": "measured below a rate 05_sdpa achieved (a busy machine?)"}
    assert "the peak was measured below a rate the run achieved" in run.mfu_unreliable


def test_a_raised_peak_below_the_cpus_best_leaves_its_mfu_shown(tmp_path):
    # The Zen 3's run: bf16 (emulated, 4.5 GFLOP/s) raised to a rate a rung achieved; MFU is over fp32's 123.
    src = ROOT / "reports/reference/cpu-amd-epyc-zen3/20261202-065802-cpu-scaled"
    run = load_run(src)
    assert list(run.unreliable_peaks) == ["bf16"] and run.mfu_unreliable == ""
    assert headline(run)[6] == f"{100 * run.rung('03_fused_adamw').mfu:.1f}%"
    d = tmp_path / "run"  # the same run with fp32 raised too: its MFU's basis is then the raised one
    shutil.copytree(src, d)
    doc = json.loads((d / "rungs.json").read_text())
    doc["measured"]["unreliable"]["fp32"] = {"why": "measured below a rate 03_fused_adamw achieved"}
    (d / "rungs.json").write_text(json.dumps(doc))
    assert "fp32: measured below" in load_run(d).mfu_unreliable and headline(load_run(d))[6] == "?"


def _with_fp8_rung(tmp_path, status="ok", device_type=None):
    """The committed H100 run with an FP8 rung added (SYNTHETIC: built on 20_top+fused_residual_norm, as its entry
    with tok/s 0.9x, matmuls 3 ms shorter and elementwise 5 ms longer), and the variants' traits rungs.json keeps."""
    d = tmp_path / "run"
    shutil.copytree(ROOT / "reports/reference/gpu-nvidia-h100-80gb-hbm3/20261126-210951-gpu-124m", d)
    doc = json.loads((d / "rungs.json").read_text())
    fp8 = json.loads(json.dumps(next(r for r in doc["rungs"] if r["name"] == "20_top+fused_residual_norm")))
    fp8.update(name="25_top+fp8_linears", variant="fp8_linears", compare_to="20_top+fused_residual_norm",
               variants=fp8["variants"] + ["fp8_linears"])
    fp8["median"]["tokens_per_sec"] *= 0.9
    fp8["repetitions"]["tokens_per_sec"] = [x * 0.9 for x in fp8["repetitions"]["tokens_per_sec"]]
    fp8["breakdown"]["category_ms"]["matmul"] -= 3.0
    fp8["breakdown"]["category_ms"]["elementwise"] += 5.0
    if status == "skipped":
        fp8.update(status="skipped", error="")
        fp8["skipped"] = [{"variant": "fp8_linears", "reason": "FP8 matmuls need a CUDA GPU of sm89+"}]
    doc["rungs"].append(fp8)
    doc["variants"] = {"fp8_linears": {"parity": "fp8", "extra": True, "anti": False}}
    if device_type:  # (its kernels.json, timed on the GPU, would not belong)
        doc["device"]["type"] = device_type
        (d / "kernels.json").unlink(missing_ok=True)
    (d / "rungs.json").write_text(json.dumps(doc))
    return d


def test_the_h200_run_s_fp8_finding_is_its_loss_and_its_op_by_op_figure():
    # The committed H200 run: FP8 ran at the top's batch with no breakdown pass (the budget's floor then), so the line
    # says so and gives kernels.json's FP8 MLP against the top's, the figure that says where the time went.
    from gpt2bench_report.findings import findings
    run = load_run(ROOT / "reports/reference/gpu-nvidia-h200/20261204-174111-gpu-124m")
    [line] = [ln for ln in findings(run) if ln.startswith("**FP8**")]
    assert line.startswith("**FP8**: 22_top+fp8_linears 0.62x 12_batch_scaling at B=128 (real), parity pass, peak "
                           "memory 1.05x; no breakdown of 22_top+fp8_linears to say where the time went; "), line
    assert line.endswith(": fc1 and fc2 in FP8 (kernels/fp8_linear), GELU apart 1.136 ms, 0.43x the top rung's "
                         "0.490 ms."), line


def test_the_blocks_matmuls_in_fp8_against_aten_s(tmp_path):
    # kernels.json's fp8_gemms (SYNTHETIC figures on the committed H200 run, which predates them): each matmul's
    # FP8 as fp8_linear runs it (`as_run`) and with the other accumulation, the sums a step, and the FP8 finding.
    run_dir = tmp_path / "run"
    shutil.copytree(ROOT / "reports/reference/gpu-nvidia-h200/20261204-174111-gpu-124m", run_dir)
    assert fp8_gemm_section(load_run(run_dir)) is None
    k = json.loads((run_dir / "kernels.json").read_text())
    k["fp8_gemms"] = [_gemm("fc1 forward", [0.060, 0.040, 0.045], as_run=1, max_rel_diff=[0.03, 0.05]),
                      _gemm("fc1 dX", [0.050, 0.060, 0.040], as_run=1, max_rel_diff=[0.03, 0.05]),
                      {"name": "fc1 dW", "error": "CUBLAS_STATUS_NOT_SUPPORTED"}]
    (run_dir / "kernels.json").write_text(json.dumps(k))
    run = load_run(run_dir)
    title, rows, notes = fp8_gemm_section(run)
    assert title == "The blocks' matmuls in FP8 against ATen's (kernels.json: fp8_gemms)"
    assert rows[1] == ["fc1 forward", "8192 x 3072 x 768", "12", "0.0600", "0.0400", "966", "0.0450", "1.50x"]
    assert rows[2][4:] == ["0.0600", "644", "0.0400", "0.83x"]
    assert rows[3][4] == "error: CUBLAS_STATUS_NOT_SUPPORTED"
    assert ("The blocks' matmuls a step: 1.32 ms as ATen runs them, 1.20 ms in FP8 as fp8_linear runs them (1.10x), "
            "0.96 ms at each one's faster accumulation.") in notes
    assert "FP8's products differ from ATen's by up to 5.0e-02 of their largest element" in notes[2]
    [line] = [ln for ln in findings(run) if ln.startswith("**FP8**")]
    assert line.endswith("0.490 ms; its matmuls alone 1.20 ms a step against ATen's 1.32 (kernels.json: fp8_gemms, "
                         "B=8)."), line
    md = (write_report([run], tmp_path / "report") / "report.md").read_text()
    assert "**The blocks' matmuls in FP8 against ATen's (kernels.json: fp8_gemms)**" in md


def test_the_fastest_rung_s_finding_says_where_its_step_s_time_goes():
    # The committed H200 run's top: its breakdown's two largest kinds of work and the rest; the matmuls' rate is
    # the block and head GEMMs' counted FLOPs (97.2 TFLOP, the attention kernels' 7.4 apart) over their 145.3 ms.
    # The ceiling: its MFU over the matmuls' and attention's share (199.1 of 247.5 ms), were all else to take none.
    from gpt2bench_report.findings import findings
    h200 = load_run(ROOT / "reports/reference/gpu-nvidia-h200/20261204-174111-gpu-124m")
    top = next(r for r in h200.rungs if r.name == "28_top+kept")
    kinds = top.profile["category_ms"]
    ceiling = 100 * top.mfu * sum(kinds.values()) / (kinds["matmul"] + kinds["attention"])
    assert f"{ceiling:.1f}" == "53.9"
    assert findings(h200)[0] == (
        "**Fastest**: 28_top+kept (B=128), 537,877 tok/s, 14.39x the baseline's 37,378; MFU 43.4%; its breakdown's "
        "device time: matmul 59% at 669 TFLOP/s (0.86x the bf16 GEMM the run measured), attention 22%, the rest 19%; "
        "the matmuls and attention alone at these rates: MFU 53.9%.")
    # a CPU's rate in GFLOP/s; no breakdown of the fastest rung (the H100 run's top has none): nothing said
    zen4 = load_run(ROOT / "reports/reference/cpu-amd-epyc-zen4/20261208-003951-cpu-scaled")
    assert "; its breakdown's device time: matmul 58% at 304 GFLOP/s (0.72x the bf16 GEMM" in findings(zen4)[0]
    h100 = load_run(ROOT / "reports/reference/gpu-nvidia-h100-80gb-hbm3/20261127-030430-gpu-124m")
    assert findings(h100)[0].endswith("; MFU 40.4%.")


def test_a_gpu_run_s_findings_say_what_fp8_gained_and_where_its_time_went(tmp_path):
    from gpt2bench_report.findings import findings
    run = load_run(_with_fp8_rung(tmp_path))
    top = run.previous(run.rung("25_top+fp8_linears"))
    [line] = [ln for ln in findings(run) if ln.startswith("**FP8**")]
    assert "25_top+fp8_linears 0.90x 20_top+fused_residual_norm at B=32 (real)" in line, line
    matmul = top.profile["category_ms"]["matmul"]
    assert f"matmuls {matmul:.1f} -> {matmul - 3:.1f} ms, its elementwise +5.0 ms" in line, line
    # a breakdown with FP8's own kind of work (its quantizations and layouts) says it before the largest other change
    d = _with_fp8_rung(tmp_path / "k")
    doc = json.loads((d / "rungs.json").read_text())
    doc["rungs"][-1]["breakdown"]["category_ms"].update(fp8_scaling=4.0, elementwise=top.profile["category_ms"]
                                                         ["elementwise"] + 1.0)
    (d / "rungs.json").write_text(json.dumps(doc))
    [line] = [ln for ln in findings(load_run(d)) if ln.startswith("**FP8**")]
    assert f"matmuls {matmul:.1f} -> {matmul - 3:.1f} ms, its scaling and layouts 4.0 ms, its elementwise +1.0 ms" \
        in line, line
    assert "parity pass" in line and "peak memory" in line
    # skipped on this GPU: said with the variant's own reason; a CPU run or a run older than the traits: no line
    run = load_run(_with_fp8_rung(tmp_path / "s", status="skipped"))
    assert "**FP8**: 25_top+fp8_linears skipped: FP8 matmuls need a CUDA GPU of sm89+." in findings(run)
    assert not [ln for ln in findings(load_run(_with_fp8_rung(tmp_path / "c", device_type="cpu"))) if "FP8" in ln]
    run.variant_traits = {}
    assert not [ln for ln in findings(run) if "FP8" in ln]


def test_a_run_s_checks_of_its_own_figures_name_each_failure_and_its_figure(tmp_path):
    from gpt2bench_report.checks import check_notes
    h100 = ROOT / "reports/reference/gpu-nvidia-h100-80gb-hbm3/20261127-030430-gpu-124m"
    # The committed H100 run as it is: its gelu_epilogues GEMMs went uncounted then (counted since 07de9df).
    assert findings(load_run(h100))[-1].endswith(
        "its own checks fail: FLOP count at 24_planned_batch+kept (0.929x) (notes).")
    d = tmp_path / "h100"
    shutil.copytree(h100, d)
    doc = json.loads((d / "rungs.json").read_text())
    rung = {r["name"]: r for r in doc["rungs"]}
    rung["03_fused_adamw"]["held_at_start"]["allocated_bytes"] = 3 * 2**20
    rung["07_sdpa"]["breakdown"]["phase_coverage"] = 0.9
    rung["09_fuse_bias_gelu"]["flops"]["counted_vs_formula"] = 1.2
    rung["24_planned_batch+kept"]["flops"]["counted_vs_formula"] = 1.0
    unread = {"available": False, "why": "NVML: not supported"}
    rung["10_cuda_graph"]["clocks"] = rung["11_vocab_padding"]["clocks"] = unread
    compiled = next(x for x in doc["references"] if x["name"] == "ref_torch_compile")
    compiled["clocks"] = dict(rung["07_sdpa"]["clocks"])
    compiled["compile_scope_clocks"] = {"model": {"available": False, "why": "no sample within the timed window"}}
    (d / "rungs.json").write_text(json.dumps(doc))
    run = load_run(d)
    assert findings(run)[-1] == (
        "**Run**: complete; 24 of 25 rungs ran to the end; its own checks fail: memory held at start at "
        "03_fused_adamw (3 MiB); breakdown coverage at 07_sdpa (90%); FLOP count at 09_fuse_bias_gelu (1.200x); "
        "clocks at 10_cuda_graph (NVML: not supported), 11_vocab_padding (NVML: not supported) and 1 more (notes).")
    notes = check_notes(run)
    assert len(notes) == 4 and notes == run_notes(run)[:4]
    assert notes[3].startswith("check failed, clocks: 10_cuda_graph (NVML: not supported), 11_vocab_padding (NVML: "
                               "not supported), ref_torch_compile "
                               f"model at batch {compiled['config']['batch']} (no sample within the timed window): ")
    assert "above, more work than the model's" in notes[2]
    # A CPU has no clocks to check; a run older than held_at_start is not checked for it; a bad one is named.
    assert findings(load_run(FIXTURES / "cpu_2threads"))[-1].endswith(
        "its own checks pass (breakdown coverage, FLOP count).")
    rung["03_fused_adamw"]["held_at_start"] = 3
    (d / "rungs.json").write_text(json.dumps(doc))
    with pytest.raises(ReportError, match="rung 03_fused_adamw's held_at_start is 3, not an object"):
        load_run(d)


def test_paired_ratios_that_trend_or_differ_by_the_side_first_are_named(tmp_path):
    from gpt2bench_report.checks import check_notes
    from gpt2bench_report.stats import kendall_trend
    d = tmp_path / "h100"
    shutil.copytree(ROOT / "reports/reference/gpu-nvidia-h100-80gb-hbm3/20261127-030430-gpu-124m", d)
    doc = json.loads((d / "rungs.json").read_text())
    eager, compiled = doc["references"][:2]
    rising = [1.00, 1.01, 1.03, 1.02, 1.05, 1.06, 1.08, 1.07, 1.09]  # later pairs faster on the C++ side
    by_side = [1.301, 1.101, 1.298, 1.103, 1.303, 1.099, 1.300, 1.102, 1.297]  # C++ first: 1.30x, else 1.10x
    assert kendall_trend(by_side)[1] > 0.05 and kendall_trend(rising)[1] < 0.001
    eager["again"]["paired"] = {"ratios": rising}
    compiled["again"]["paired"] = {"ratios": by_side}
    (d / "rungs.json").write_text(json.dumps(doc))
    run = load_run(d)
    line = findings(run)[-1]
    assert f"paired trend at ref_torch_eager at batch {eager['config']['batch']} (tau +0.89, p 0.000)" in line, line
    assert (f"paired order at ref_torch_compile at batch {compiled['config']['batch']} (C++ first 1.30x, Python "
            "first 1.10x, p 0.016)") in line, line
    assert "paired trend at ref_torch_compile" not in line and "paired order at ref_torch_eager" not in line
    assert [n.split(":")[0] for n in check_notes(run)] == ["check failed, FLOP count", "check failed, paired trend",
                                                           "check failed, paired order"]
    # Each test at 0.05 over the references it tests: p 0.045 fails with one paired reference, not with two.
    edge = [1.05, 1.01, 1.02, 1.04, 1.03, 1.08, 1.06, 1.09, 1.07]
    assert 0.025 < kendall_trend(edge)[1] < 0.05
    eager["again"]["paired"]["ratios"] = edge
    (d / "rungs.json").write_text(json.dumps(doc))
    assert "paired trend" not in findings(load_run(d))[-1]
    del compiled["again"]["paired"]
    (d / "rungs.json").write_text(json.dumps(doc))
    assert "paired trend at ref_torch_eager" in findings(load_run(d))[-1]
    compiled["again"]["paired"] = {}
    # Five pairs (a CPU run's repetitions) can show a trend, not a side's order (4 pairs against 4 at least).
    five = [1.0, 1.1, 1.2, 1.3, 1.4]
    eager["again"]["paired"]["ratios"], compiled["again"]["paired"]["ratios"] = five, by_side[:5]
    (d / "rungs.json").write_text(json.dumps(doc))
    line = findings(load_run(d))[-1]
    assert "paired trend at ref_torch_eager" in line and "paired order" not in line, line
    zen3 = ROOT / "reports/reference/cpu-amd-epyc-zen3/20261202-065802-cpu-scaled"  # its references paired, 5 pairs
    assert findings(load_run(zen3))[-1].endswith(
        "its own checks pass (memory held at start, breakdown coverage, FLOP count, paired trend).")


def _paired(ratios, movement, disturbed, with_):
    return {"with": with_, "with_tokens_per_sec": [1.0] * len(ratios), "ratios": ratios,
            "ratio": sorted(ratios)[len(ratios) // 2], "interval": [min(ratios), max(ratios)], "level": 0.94,
            "movement": movement, "disturbed": disturbed}


def test_paired_ratios_are_the_ratios_and_a_disturbed_one_is_never_claimed(tmp_path):
    # 01 timed while the machine moved 2.3x: its 3.19x (the medians' ratio, were it unpaired) is not a gain; 04's
    # pairs say 1.29x however its medians compare, and the product of the links is the rung's x over the baseline.
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURES / "cpu_2threads", run_dir)
    doc = json.loads((run_dir / "rungs.json").read_text())
    by = {r["name"]: r for r in doc["rungs"]}
    by["01_mask_on_the_fly"]["repetitions"]["tokens_per_sec"] = [103000.0] * 5
    by["01_mask_on_the_fly"]["median"]["tokens_per_sec"] = 103000.0
    by["01_mask_on_the_fly"]["paired"] = _paired([0.99, 1.0, 1.01, 0.98, 1.02], 2.3, True, "00_baseline")
    by["03_fused_adamw"]["paired"] = _paired([1.09, 1.1, 1.11, 1.1, 1.12], 1.05, False, "01_mask_on_the_fly")
    by["04_native_layers"]["paired"] = _paired([1.27, 1.28, 1.29, 1.3, 1.31], 1.04, False, "03_fused_adamw")
    by["05_sdpa"]["paired"] = {"alone": "a data-parallel rung: its ranks take the same steps, none beside them"}
    (run_dir / "rungs.json").write_text(json.dumps(doc))
    run = load_run(run_dir)
    r = {x.name: x for x in run.rungs}
    assert against_previous(run, r["01_mask_on_the_fly"])[0] == "disturbed"
    assert against_previous(run, r["04_native_layers"]) == ("real", "paired: 5 pairs, 1.27-1.31x at 94%")
    assert against_previous(run, r["05_sdpa"])[1] == "U test p=0.008"  # timed alone: its repetitions against 04's
    assert run.ratio(r["04_native_layers"]) == 1.29
    assert run.vs_base(r["04_native_layers"]) == pytest.approx(1.0 * 1.1 * 1.29)
    lines = findings(run)
    assert lines[0] == ("**Disturbed**: the machine's speed moved up to 2.30x while 01_mask_on_the_fly was timed, "
                        "more than the difference measured: its ratio is not claimed.")
    gains = next(x for x in lines if x.startswith("**Largest gains**"))
    assert "01_mask_on_the_fly" not in gains and "04_native_layers 1.29x" in gains
    assert "its own checks fail: disturbed at 01_mask_on_the_fly (moved 2.30x)" in lines[-1]
    rows = {row[0]: row for row in ladder_table(run)[1:]}
    assert rows["01_mask_on_the_fly"][3:5] == ["1.00x", "1.00x"] and rows["01_mask_on_the_fly"][9] == "disturbed"
    assert rows["04_native_layers"][3] == "1.29x"
    assert any("01_mask_on_the_fly: disturbed" in n for n in run_notes(run))
    # Steady work beside the run (a CPU's cores shared: busy): a ratio it changes is not claimed, however large
    by["04_native_layers"]["paired"].update(disturbed=True, busy=True, core_share=0.6)
    (run_dir / "rungs.json").write_text(json.dumps(doc))
    run = load_run(run_dir)
    assert findings(run)[0].endswith("were timed, other work taking its cores (the run got 60% of them): their "
                                     "ratios are not claimed.")
    assert "04_native_layers (moved 1.04x, 60% of its cores)" in findings(run)[-1]
    assert against_previous(run, run.rung("04_native_layers"))[1].endswith(
        "moved 1.04x, the run got 60% of its cores while they were timed")
