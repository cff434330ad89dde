"""Reading gpt2bench run directories. Every error names the directory or file at fault."""

from __future__ import annotations

import fcntl
import json
import math
from dataclasses import dataclass, field
from pathlib import Path


class ReportError(Exception):
    """Bad input: a missing or malformed run directory."""


@dataclass
class Rung:
    name: str
    status: str  # ok | skipped | diverged | oom | interrupted | error | pending
    published_rung: int
    variants: list[str]
    skipped: list[dict]
    error: str = ""
    tokens_per_sec: float | None = None
    step_ms: float | None = None
    tokens_per_step: int = 0  # all ranks' tokens in one optimizer step
    mfu: float | None = None
    peak_alloc_bytes: float | None = None
    peak_reserved_bytes: float | None = None
    rep_tokens_per_sec: list[float] = field(default_factory=list)
    parity_verdict: str = "n/a"
    parity_dev: float = 0.0
    parity_grad_ratio: float = 0.0  # the first step's gradient norm over the baseline's (0: not compared)
    parity_against: str = "baseline"  # the rung judged against: an extra on batch_scaling's top, that top
    parity_judged_as: str = ""  # exact, precision or problem
    parity_worst: tuple[str, float] | None = None  # the parameter whose first gradient is furthest off, and its ratio
    batch: int = 0
    profile: dict | None = None
    scaling_efficiency: float | None = None
    ci: tuple[float, float] | None = None  # the median tok/s's distribution-free interval
    ci_level: float | None = None
    cv: float | None = None
    clocks: dict | None = None
    kind: str | None = None  # baseline | ladder | extra | add_one | all | drop_one | recipe | kept | control
    compare_to: str | None = None
    variant: str = ""  # the variant the rung adds (or, drop_one, removes)
    choices: list = field(default_factory=list)  # settings settled by timing: setting, key, rule, tries, chosen
    anti_variant: bool = False  # slowed on purpose (sync_every_step): never a run's fastest
    kept: list | None = None  # a kept rung: each candidate extra, whether it joined and why (rungs.json "kept")
    ties: bool = False  # a kept rung that also took the extras that tied the top (each such entry "tie")
    measured_matmul: float | None = None  # FLOP/s of a GEMM in the rung's precision, measured by its run
    device_fault: bool = False  # its error lost the device (the process's CUDA context): the rest ran in a new one
    ended_processes: int = 0  # processes that ended in it recording nothing (a crash, a kill): --resume counted them
    precision: str = "fp32"  # what its matmuls compute in: fp32 | tf32 | bf16 | fp16 (rungs.json "precision")
    mfu_vs_measured_peak: float | None = None  # model FLOPs/s over the matmul rate its run measured in `precision`
    held_at_start: dict | None = None  # the device memory allocated and reserved as it started (0: nothing left behind)
    counted_vs_formula: float | None = None  # the matmul FLOPs its breakdown pass counted over the formula's
    paired: dict | None = None  # timed beside the rung it is measured against (rungs.json "paired"; older runs: none)

    @property
    def throttled(self) -> bool:
        return bool(self.clocks and self.clocks.get("throttled"))

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def disturbed(self) -> bool:
        """Timed while the machine's speed moved more than its difference (docs/measurement.md: Pairs)."""
        return bool(self.ok and self.paired and self.paired.get("disturbed"))


@dataclass
class Run:
    path: Path
    profile: str
    plan: str
    device: dict
    build: dict
    context: dict
    status: str
    rungs: list[Rung]
    mfu_basis: str = ""
    references: list = field(default_factory=list)  # rungs.json's Python reference rungs, as written
    flop_shares: dict | None = None  # the baseline's flops.shares: blocks, lm_head, attention
    synthetic: str = ""  # a test fixture's own words on what in it is made up; "" for a real run
    measured: dict = field(default_factory=dict)  # rungs.json "measured": matmul_tflops, copy_bandwidth_gbs
    kernels: dict | None = None  # kernels.json (gpt2bench kernels --out RUN/kernels.json): our ops against ATen's
    cards: list = field(default_factory=list)  # rungs.json's GPUs (UUIDs) the run was timed on: 2+ = resumed on another
    variant_traits: dict = field(default_factory=dict)  # rungs.json "variants": each one's parity class, extra, anti
    # Precisions whose measured peak was below a rate a rung achieved (a busy machine), with why: the ladder raises
    # such a peak and says so (measured.unreliable); a run older than that is found out here.
    unreliable_peaks: dict = field(default_factory=dict)

    @property
    def mfu_unreliable(self) -> str:
        """Why the run's MFU figures are not to be shown as fact ("" if they are): a CPU's MFU is over a measured
        peak, so one measured low inflates them all; a GPU's is over its datasheet, which no rung may exceed."""
        over = [r.name for r in self.rungs if r.mfu is not None and r.mfu > 1]
        if over:
            return f"MFU over 100% ({', '.join(over)}): the peak it is taken over is below a rate the run achieved"
        rates = (self.measured or {}).get("matmul_tflops") or {}
        best = max(rates, key=rates.get) if rates else None  # a CPU's MFU basis; a peak raised below it leaves it
        if self.device.get("type") == "cpu" and self.unreliable_peaks and (best is None or best in self.unreliable_peaks):
            return "the peak was measured below a rate the run achieved (" + "; ".join(
                f"{k}: {v}" for k, v in self.unreliable_peaks.items()) + ")"
        return ""

    @property
    def device_name(self) -> str:
        """The device's name; a CPU's with its family and model where the run recorded them, and its bf16 support:
        hypervisors hide the model name (a Zen 3 and a Zen 5 EPYC were both "AMD EPYC")."""
        d = self.device
        name = d.get("name", "?")
        if d.get("type") != "cpu":
            return name
        bf16 = d.get("bf16_support", "")
        bf16 = "bf16 emulated" if bf16.startswith("emulated") else bf16.removeprefix("native (").removesuffix(")")
        extra = ", ".join(x for x in (d.get("cpu_model_id"), bf16) if x)
        return f"{name} ({extra})" if extra else name

    @property
    def label(self) -> str:
        return f"{self.device_name} [{self.path.name}]" + (" (SYNTHETIC)" if self.synthetic else "")

    def variant_parity(self, rung: Rung) -> str:
        """The parity class of the variant a rung adds, as the run's rungs.json lists it ("" in runs without it)."""
        return self.variant_traits.get(rung.variant, {}).get("parity", "")

    def rung(self, name: str) -> Rung | None:
        return next((r for r in self.rungs if r.name == name), None)

    def role(self, rung: Rung) -> tuple[str, str]:
        """What a rung is, whatever its number: its kind and the variant it adds; a kept or control rung's, the
        variant of the rung it is set against; a profile's own recipe, its name. Ladders of two commits line up by
        it: the H100's kept top, rung 23 (10 extras before it), is the H200's rung 28 (15 extras)."""
        if rung.kind in ("kept", "control"):
            on = self.rung(rung.compare_to or "")
            return rung.kind, on.variant if on else ""
        if rung.kind in ("baseline", "ladder", "extra", "add_one", "drop_one"):
            return rung.kind, rung.variant
        return "", rung.name

    def rung_as(self, role: tuple[str, str]) -> Rung | None:
        """The rung that plays `role` (see `role`)."""
        return next((r for r in self.rungs if self.role(r) == role), None)

    def breakdown_file(self, rung: str) -> dict | None:
        """breakdown/<rung>.json (every op or kernel name's count and time), or None where the pass did not run or
        the run is older than `by_name`."""
        path = self.path / "breakdown" / f"{rung}.json"
        try:
            return json.loads(path.read_text()) if path.is_file() else None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ReportError(f"{path}: not valid JSON ({e})") from e

    def ratio(self, rung: Rung, against: Rung | None = None) -> float:
        """`rung` over `against` (by default the rung it is measured against): the paired ratio where the two were
        timed beside each other, else the medians'."""
        against = against or self.previous(rung)
        if rung.paired and rung.paired.get("with") == against.name and "ratio" in rung.paired:
            return rung.paired["ratio"]
        return rung.tokens_per_sec / against.tokens_per_sec

    def vs_base(self, rung: Rung) -> float:
        """`rung` over the baseline: the product of the ratios down the rungs each is measured against (each link
        paired), else where that chain does not reach the baseline the medians'."""
        base, x, at = self.rungs[0], 1.0, rung
        while at is not base:
            prev = self.previous(at)
            if prev is None:
                return rung.tokens_per_sec / base.tokens_per_sec
            x, at = x * self.ratio(at, prev), prev
        return x

    def previous(self, rung: Rung) -> Rung | None:
        """The ok rung a rung is measured against: rungs.json's compare_to (an extra's is the ladder's
        top rung), or where that did not run, that rung's. Runs written before compare_to existed:
        the ok rung before it."""
        if rung.compare_to is None:
            i = self.rungs.index(rung)
            return next((r for r in reversed(self.rungs[:i]) if r.ok), None)
        name = rung.compare_to
        while name:
            r = self.rung(name)
            if r is None:
                return None
            if r.ok:
                return r
            name = r.compare_to
        return None


def same_device(a: Run, b: Run) -> bool:
    """Whether two runs ran on one kind of device: the same name and type, a CPU's same bf16 and fp16 support, and
    the same family and model where both runs recorded them (runs before 2026-11-25 did not). A name alone is not
    enough: a hypervisor called a Zen 3 (AVX2) and a Zen 5 (AVX512-BF16) EPYC both "AMD EPYC"."""
    da, db = a.device, b.device
    keys = ("name", "type", "bf16_support", "fp16_support")
    if any(da.get(k) != db.get(k) for k in keys):
        return False
    return not (da.get("cpu_model_id") and db.get("cpu_model_id")) or da["cpu_model_id"] == db["cpu_model_id"]


def device_groups(runs: list[Run]) -> list[list[Run]]:
    """The runs by device (same_device with each group's first run), in the order given."""
    groups: list[list[Run]] = []
    for run in runs:
        group = next((g for g in groups if same_device(g[0], run)), None)
        if group is None:
            groups.append([run])
        else:
            group.append(run)
    return groups


def _read_json(path: Path) -> dict:
    if not path.is_file():
        raise ReportError(f"{path}: missing (is {path.parent} a gpt2bench run directory?)")
    try:
        doc = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ReportError(f"{path}: not valid JSON ({e})") from e
    if not isinstance(doc, dict):
        raise ReportError(f"{path}: unexpected layout (a JSON {type(doc).__name__}, where gpt2bench writes an object)")
    return doc


def _number(v, path: Path, what: str) -> float | None:
    """A figure from a run's file: a number, or None where it is absent; anything else is refused, naming it."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ReportError(f"{path}: {what} is {json.dumps(v)[:40]}, not a finite number")
    return v


def _choices(rung: dict) -> list[dict]:
    """rungs.json's `choices`; before it (2026-11-27), its two instances as keys of their own, read as it."""
    if "choices" in rung:
        return list(rung["choices"])
    out = []
    for setting, name, what, key in (("sdpa_backend", "sdpa_choice", "backend", "attention"),
                                     ("classifier_chunk", "classifier_chunk_choice", "chunk", "head")):
        if c := rung.get(name):
            tries = [dict({k: v for k, v in t.items() if k != what}, candidate=str(t.get(what))) for t in c.get("tries", [])]
            out.append(dict(c, setting=setting, chosen=str(c.get("chosen")), tries=tries,
                            incumbent=c.get("pytorch_choice", ""), key=key))
    return out


def _spec_precision(spec: dict) -> str:
    """What a step's matmuls compute in, from its spec as the ladder's math_mode reads it: for runs older than
    rungs.json's "precision"."""
    p = spec.get("precision", "fp32")
    return "bf16" if p.startswith("bf16") else "fp16" if p.startswith("fp16") else "tf32" if spec.get("tf32") else "fp32"


def _unreliable_peaks(doc: dict, rungs: list[Rung]) -> dict:
    """measured.unreliable as the ladder wrote it, and for older runs each precision in which a rung ran
    faster than the peak measured for it."""
    out = dict((doc.get("measured") or {}).get("unreliable") or {})
    for r in rungs:
        if r.ok and r.mfu_vs_measured_peak and r.mfu_vs_measured_peak > 1 and r.precision not in out:
            out[r.precision] = f"{r.name} ran at {r.mfu_vs_measured_peak:.2f}x the {r.precision} peak measured"
    return {k: (v.get("why", "") if isinstance(v, dict) else str(v)) for k, v in out.items()}


def _run_status(written: str, rungs: list[Rung], d: Path) -> str:
    """A run whose rungs ended in error, oom or interrupted is "partial", whatever an older gpt2bench
    wrote ("complete"); one still "running" whose process is gone (nobody holds DIR/.lock) ended unfinished."""
    if written == "complete" and any(r.status in ("error", "oom", "interrupted") for r in rungs):
        return "partial"
    if written == "running" and not _lock_held(d):
        return "ended unfinished (its process is gone: a kill or a crash; --resume runs the rest)"
    return written


def _lock_held(d: Path) -> bool:
    """Whether a gpt2bench process holds the run directory's lock now (bench/ladder/run_dir.h: RunLock)."""
    try:
        with open(d / ".lock", "rb") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            return False
    except OSError:  # no lock file: a run from before the lock, or another machine's; take it as written
        return True


def _load_kernels(d: Path, device: dict) -> dict | None:
    """RUN/kernels.json, `gpt2bench kernels`' op-by-op timings, where the run directory has one; refused when it
    was timed on another device than the run (its figures would be read as this device's)."""
    path = d / "kernels.json"
    if not path.exists():
        return None
    doc = _read_json(path)
    cases, theirs = doc.get("cases"), doc.get("device")

    def timed(c: dict) -> bool:
        sides = c.get("sides")
        return (isinstance(sides, list) and len(sides) == len(c.get("speedup", [])) + 1
                and all(isinstance(s, dict) and "name" in s and isinstance(s.get("median_ms"), (int, float))
                        and s["median_ms"] > 0 for s in sides))

    if not isinstance(theirs, dict) or not isinstance(cases, list) or not all(
            isinstance(c, dict) and "variant" in c and ("error" in c or "skipped" in c or timed(c)) for c in cases):
        raise ReportError(f"{path}: unexpected layout (a device, and cases each with a variant and an error, a "
                          "reason it was skipped, or sides, ours first, and one speedup for each other side)")
    if (theirs.get("name"), theirs.get("type")) != (device.get("name"), device.get("type")):
        raise ReportError(f"{path}: timed on {theirs.get('name', '?')} ({theirs.get('type', '?')}), but the run "
                          f"on {device.get('name', '?')} ({device.get('type', '?')}); a run directory's "
                          "kernels.json must come from the run's device")
    return doc


def _held(r: dict, where: Path) -> dict | None:
    """rungs.json's held_at_start (runs before 2026-11-27 have none), its bytes checked to be numbers."""
    held = r.get("held_at_start")
    if held is not None and not isinstance(held, dict):
        raise ReportError(f"{where}: rung {r['name']}'s held_at_start is {json.dumps(held)[:40]}, not an object")
    for key, v in (held or {}).items():
        _number(v, where, f"rung {r['name']}'s held_at_start.{key}")
    return held


def _load_rung(r: dict, where: Path) -> Rung:
    """One rung of rungs.json, its figures checked to be numbers."""
    med = r.get("median", {})
    for key in ("tokens_per_sec", "step_ms", "mfu", "mfu_vs_measured_peak", "peak_alloc_bytes",
                "peak_reserved_bytes"):
        _number(med.get(key), where, f"rung {r['name']}'s median {key}")
    for v in r.get("repetitions", {}).get("tokens_per_sec", []):
        _number(v, where, f"rung {r['name']}'s repetition tok/s")
    return Rung(
        name=r["name"],
        status=r["status"],
        published_rung=r.get("published_rung", -1),
        variants=list(r.get("variants", [])),
        skipped=list(r.get("skipped", [])),
        error=r.get("error", ""),
        tokens_per_sec=med.get("tokens_per_sec"),
        step_ms=med.get("step_ms"),
        tokens_per_step=r.get("tokens_per_step", 0),
        mfu=med.get("mfu"),
        peak_alloc_bytes=med.get("peak_alloc_bytes"),
        peak_reserved_bytes=med.get("peak_reserved_bytes"),
        rep_tokens_per_sec=list(r.get("repetitions", {}).get("tokens_per_sec", [])),
        parity_verdict=r.get("parity", {}).get("verdict", "n/a"),
        parity_dev=r.get("parity", {}).get("max_abs_dev", 0.0),
        parity_grad_ratio=r.get("parity", {}).get("grad_norm_ratio", 0.0),
        parity_against=r.get("parity", {}).get("against", "baseline"),
        parity_judged_as=r.get("parity", {}).get("judged_as", ""),
        parity_worst=(r["parity"]["worst_param"], r["parity"].get("worst_param_ratio", 0.0))
        if r.get("parity", {}).get("worst_param") else None,
        batch=r.get("spec", {}).get("batch", 0),
        profile=r.get("breakdown", r.get("profile")),  # "profile" before 2026-11-23
        scaling_efficiency=r.get("scaling_efficiency"),
        ci=tuple(r["spread"]["tokens_per_sec_ci"]) if "spread" in r else None,
        ci_level=r.get("spread", {}).get("ci_level"),
        cv=r.get("spread", {}).get("cv"),
        clocks=r.get("clocks"),
        kind=r.get("kind"),
        compare_to=r.get("compare_to"),
        variant=r.get("variant", ""),
        choices=_choices(r),
        anti_variant=bool(r.get("anti_variant", False)),
        kept=r.get("kept"),
        ties=bool(r.get("ties", False)),
        measured_matmul=(r.get("peak_flops") or {}).get("measured_matmul") or None,
        device_fault=bool(r.get("device_fault", False)),
        ended_processes=int(r.get("ended_processes", 0)),
        precision=r.get("precision") or _spec_precision(r.get("spec", {})),
        mfu_vs_measured_peak=med.get("mfu_vs_measured_peak"),
        held_at_start=_held(r, where),
        counted_vs_formula=_number(r.get("flops", {}).get("counted_vs_formula"), where,
                                   f"rung {r['name']}'s flops.counted_vs_formula"),
        paired=r.get("paired"),
    )


def load_run(path: str | Path) -> Run:
    d = Path(path)
    if not d.is_dir():
        raise ReportError(f"{d}: no such run directory")
    rungs_doc = _read_json(d / "rungs.json")
    results = _read_json(d / "results.json")
    if not isinstance(rungs_doc.get("rungs"), list):
        raise ReportError(f"{d / 'rungs.json'}: its rungs are {json.dumps(rungs_doc.get('rungs'))[:40]}, not a list")
    try:
        rungs = [_load_rung(r, d / "rungs.json") for r in rungs_doc["rungs"]]
        return Run(
            path=d,
            profile=rungs_doc["profile"]["name"],
            plan=rungs_doc["profile"].get("plan", "ladder"),
            device=rungs_doc["device"],
            build=rungs_doc.get("build", {}),
            context=results.get("context", {}),
            status=_run_status(rungs_doc.get("status", "?"), rungs, d),
            rungs=rungs,
            mfu_basis=rungs_doc.get("mfu", {}).get("basis", ""),
            references=list(rungs_doc.get("references", [])),
            synthetic=rungs_doc.get("synthetic", ""),
            measured=rungs_doc.get("measured") or {},
            flop_shares=(rungs_doc["rungs"][0].get("flops", {}).get("shares") if rungs_doc["rungs"] else None),
            kernels=_load_kernels(d, rungs_doc["device"]),
            cards=list(rungs_doc.get("cards", [])),
            variant_traits=rungs_doc.get("variants") or {},
            unreliable_peaks=_unreliable_peaks(rungs_doc, rungs),
        )
    except KeyError as e:
        raise ReportError(f"{d / 'rungs.json'}: unexpected layout (missing {e})") from e
    except (TypeError, AttributeError, ValueError) as e:
        raise ReportError(f"{d / 'rungs.json'}: unexpected layout ({e})") from e


def rung_roles(runs: list[Run]) -> list[tuple[tuple[str, str], str]]:
    """Each rung role that ran ok in some run, in the order the runs name them, with its label: the rung's name, or
    its names in the runs where they are numbered apart ("22_top_again / 27_top_again")."""
    roles = []
    for run in runs:
        for r in run.rungs:
            if r.ok and run.role(r) not in roles:
                roles.append(run.role(r))
    out = []
    for n in roles:
        names = []
        for run in runs:
            if (r := run.rung_as(n)) and r.name not in names:
                names.append(r.name)
        out.append((n, " / ".join(names)))
    return out
