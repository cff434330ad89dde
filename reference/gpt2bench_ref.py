"""The reference rungs: the GPT-2 training step written in Python PyTorch, run by `gpt2bench ladder` as a
subprocess on the same device, data and batch as its C++ rungs, and reported beside them (never mixed into
the ladder's speed-ups). Two fixed configurations, so the comparison cannot be weakened:

  ref_torch_eager    the baseline's math: fp32, manual attention with a mask buffer, hand-written LayerNorm and
                     GELU, for-each AdamW (compared with 00_baseline)
  ref_torch_compile  bf16 weights (the model cast, as bf16_cast), fused AdamW, nn.functional layers, SDPA with
                     PyTorch's default backend choice, the vocabulary padded, torch.compile(model) in its
                     default mode (compared with the best C++ rung at the same batch). Compiled both ways a
                     user writes it (`compile_scopes`): the model alone, the loss eager after it (seed 000's
                     code), and the model that returns its loss (nanoGPT's), each timed; the faster is the
                     reference's figure, both are kept

The model (gpt2_model.py) is kept equivalent to model/gpt2.cpp and model/layers.cpp: the same modules, parameter
count and initialisation, the same loss on the same batch (the parity losses; tested end to end by ctest
ReferenceRungs). With `pair_fds` in CONFIG, its repetitions then alternate with gpt2bench's (paired()).

`--warm CONFIG FORM...` compiles FORMs (parity, model, model_and_loss) of that configuration into torch.compile's
on-disk caches and exits, so that the reference's own compilations later are cache hits (gpt2bench
reference-config prints CONFIG; scripts/gpu_session.sh first runs it beside our kernels' tests).

usage: python gpt2bench_ref.py CONFIG.json OUT.json | --warm CONFIG.json FORM...   (CONFIG: gpt2bench's)
"""
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # gpt2_model beside it, however this is loaded
from gpt2_model import GPT2  # noqa: E402


def parameter_count(model):
    return sum(p.numel() for p in model.parameters())


def load_tokens(path):
    with open(path, "rb") as f:
        return torch.frombuffer(bytearray(f.read()), dtype=torch.int64)


class Batches:
    """model/data.cpp's Loader on one rank: consecutive B·T windows, wrapping to the start."""

    def __init__(self, tokens, b, t, device):
        self.tokens, self.b, self.t, self.device, self.pos = tokens, b, t, device, 0

    def next(self):
        n = self.b * self.t
        if self.pos + n + 1 > self.tokens.numel():
            self.pos = 0
        buf = self.tokens[self.pos:self.pos + n + 1]
        self.pos += n
        return (buf[:n].view(self.b, self.t).to(self.device, non_blocking=True),
                buf[1:].view(self.b, self.t).to(self.device, non_blocking=True))


def build(cfg, device):
    m = dict(cfg["model"])
    if cfg.get("parity"):
        m["dropout"] = 0.0  # as the C++ parity trajectory: dropout masks depend on the kernels' RNG use
    model = GPT2(m, sdpa=cfg["attention"] == "sdpa", native=cfg["layers"] == "native")
    model.init_weights(cfg["seed"])
    model.to(device)
    if cfg["precision"] == "bf16_cast":
        model.to(torch.bfloat16)
    o = cfg["optimizer"]
    # form: "loop" (one parameter at a time, the C++ CPU baseline's), "foreach" (its GPU one), "fused"
    opt = torch.optim.AdamW(model.parameters(), lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"],
                            weight_decay=o["weight_decay"], foreach=o["form"] == "foreach",
                            fused=True if o["form"] == "fused" else None)
    return model, opt


class WithLoss(nn.Module):
    """The model returning its loss, as nanoGPT's forward(idx, targets) does: compiled, the loss is in the graph."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, y):
        return cross_entropy(self.model(x), y)


def cross_entropy(logits, y):
    return F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))


def make_step(model, opt, scope):
    """One training step. scope: None (eager), "model" (torch.compile(model), the loss eager after it) or
    "model_and_loss" (torch.compile of the model that returns its loss)."""
    if scope == "model_and_loss":
        loss_of = torch.compile(WithLoss(model))
    else:
        fwd = torch.compile(model) if scope == "model" else model
        loss_of = lambda x, y: cross_entropy(fwd(x), y)  # noqa: E731

    def step(x, y):
        loss = loss_of(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()
    return step


def first_step_gradient_norm(opt, beta1):
    """The L2 norm of the whole gradient the first step took, as the C++ parity trajectory reads it: after one
    AdamW step exp_avg = (1 - beta1) * grad, in every form (loop, foreach, fused)."""
    sq = sum(float(s["exp_avg"].double().square().sum()) for s in opt.state.values())
    return math.sqrt(sq) / (1.0 - beta1)


def first_step_gradient_norms(model, opt, beta1):
    """first_step_gradient_norm parameter by parameter, named and shaped as canonical_parameters (the padded rows
    left out), as the C++ parity trajectory reads them: each view taken of its parameter's exp_avg."""
    names, sums = [], []
    for name, view in model.canonical_parameters():
        base = view if view._base is None else view._base
        m = opt.state[base]["exp_avg"]
        g = m.as_strided(view.shape, view.stride(), m.storage_offset() + view.storage_offset() - base.storage_offset())
        names.append(name)
        sums.append(g.double().square().sum())
    norms = (torch.stack(sums).sqrt() / (1.0 - beta1)).tolist() if sums else []
    return dict(zip(names, norms))


def by_name(events, n, cuda):
    """One step's events per name, as the C++ breakdown pass's `by_name` has them, to be set side by side (the eager
    gap). CPU: what the C++ collector's RecordFunction callback takes, the FUNCTION scope (ATen's ops and autograd's
    evaluate_function ranges), counted at every depth and timed where no other such op called them. GPU: kernels
    and copies on the device, timed there; copies and sets named "memcpy"/"memset" as CUPTI's records are, and not
    counted as launches. A range's span on the device (a user annotation: "Optimizer.step#AdamW.step") is no kernel:
    its kernels are counted on their own, as torch's own tables count them. `events`: torch.profiler's FunctionEvents
    over `n` steps. Returns (events a step, rows)."""
    table, launches = {}, 0.0
    for e in events:
        if cuda:
            if e.device_type != torch.autograd.DeviceType.CUDA or getattr(e, "is_user_annotation", False):
                continue
            name = "memcpy" if e.name.startswith("Memcpy") else "memset" if e.name.startswith("Memset") else e.name
            ms, launch = e.time_range.elapsed_us() / 1e3, name not in ("memcpy", "memset")
        else:
            if e.scope != 0:
                continue
            p = e.cpu_parent
            while p is not None and p.scope != 0:
                p = p.cpu_parent
            name, ms, launch = e.name, (e.time_range.elapsed_us() / 1e3 if p is None else 0.0), True
        count, total = table.get(name, (0.0, 0.0))
        table[name] = (count + 1 / n, total + ms / n)
        launches += launch / n
    rows = sorted(table.items(), key=lambda kv: (-kv[1][1], -kv[1][0]))
    return launches, [{"name": k, "count_per_step": c, "ms_per_step": t} for k, (c, t) in rows]


def breakdown(step, data, n, cuda, sync):
    """`n` steps under torch.profiler, after the timed ones: the reference's side of the eager gap (by_name)."""
    from torch.profiler import ProfilerActivity, profile
    sync()
    host = 0.0  # first unprofiled, as the C++ pass: the host's time inside the steps' calls, before the one wait
    for _ in range(n):
        t0 = time.perf_counter()
        step(*data.next())
        host += time.perf_counter() - t0
    sync()
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        t0 = time.perf_counter()
        for _ in range(n):
            step(*data.next())
        sync()
        wall = time.perf_counter() - t0
    events, rows = by_name(prof.events(), n, cuda)
    if cuda and events == 0:  # CUPTI's collection off in this process: no table rather than one of zeros
        return {"source": "torch.profiler", "steps": n, "error": f"torch.profiler recorded no kernel over {n} "
                "profiled steps: its CUDA activity collection is off in this process"}
    return {"source": "torch.profiler", "events": "kernel launches" if cuda else "ATen ops", "steps": n,
            "step_ms": 1e3 * wall / n, "host_ms_per_step": 1e3 * host / n, "events_per_step": events, "by_name": rows}


def forms_of(cfg):
    """The step's forms the reference times: its compile scopes, or the one eager form (None)."""
    scopes = (cfg.get("compile_scopes") or ["model"]) if cfg["compile"] else [None]
    if unknown := [s for s in scopes if s not in (None, "model", "model_and_loss")]:
        raise ValueError(f"compile_scopes: {unknown} (expected model, model_and_loss)")
    return scopes


def said(e):
    """An exception's type and first line: what a failed form or parity run records."""
    return f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"


def parity_form_of(cfg):
    """The parity run's form: the first timed form's, uncompiled (None) where `parity_eager` says so."""
    return None if cfg.get("parity_eager") else forms_of(cfg)[0]


# torch.OutOfMemoryError (torch 2.5 on), torch.cuda.OutOfMemoryError before: what a device out of memory raises.
OUT_OF_MEMORY = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)


def parity_run(cfg, device, tokens, scopes):
    """The parity figures: the first parity_steps losses from the seed (dropout off) on the data from its start, the
    first step's gradient norms, the first batch's loss after them; in the first timed scope's form, compiled, or
    uncompiled where `parity_eager` says so."""
    b, t = cfg["batch"], cfg["model"]["context"]
    out = {}
    model, opt = build(dict(cfg, parity=True), device)
    out["parameters"] = parameter_count(model)
    parity_scope = parity_form_of(cfg)
    out["parity_form"] = parity_scope or "eager"
    step, data = make_step(model, opt, parity_scope), Batches(tokens, b, t, device)
    t0 = time.perf_counter()
    out["parity_losses"] = [float(step(*data.next()))]  # float(): a device sync
    if parity_scope == scopes[0]:
        out["first_step_s"] = time.perf_counter() - t0  # torch.compile's compilation, when compiled
    out["parity_grad_norm"] = first_step_gradient_norm(opt, cfg["optimizer"]["beta1"])
    out["parity_grad_norms"] = first_step_gradient_norms(model, opt, cfg["optimizer"]["beta1"])
    out["parity_losses"] += [float(step(*data.next())) for _ in range(cfg["parity_steps"] - 1)]
    out["parity_s"] = time.perf_counter() - t0
    # The first batch's loss again, after the steps (the uncompiled module: the same weights, no recompilation
    # for no_grad): at another batch than the C++ baseline's, whether training lowered it is the parity check.
    with torch.no_grad():
        x0, y0 = Batches(tokens, b, t, device).next()
        out["parity_first_batch_after"] = float(cross_entropy(model(x0), y0))
    return out


def time_forms(cfg, device, tokens, scopes, started, sync):
    """Each scope in turn: built, compiled by its first step (timed apart), warmed up, then repetitions of `steps`
    steps, one device synchronisation a repetition, in its share of what the budget has left. The last scope's
    share holds the breakdown pass's time (it runs once, for the faster scope). A scope that fails (inductor cannot
    compile it, the device runs out of memory) is recorded with its error and the others stand; only when every one
    fails does the reference fail, with the last error. Returns (forms, failed, live): live the last scope's step."""
    cuda = device.type == "cuda"
    budget = cfg.get("budget_s")  # None: no time budget; else seconds for all of this (0: spent, the floor)
    forms, failed, live = {}, {}, None
    for i, scope in enumerate(scopes):
        live = None  # the last scope's model and optimizer state freed before the next is built
        if cuda:
            torch.cuda.empty_cache()
        share = None if budget is None else (budget - (time.perf_counter() - started)) / (len(scopes) - i)
        profiled = cfg.get("breakdown_steps", 0) if i == len(scopes) - 1 else 0
        try:
            forms[scope], step, data = timed_model(cfg, device, tokens, scope, share, profiled, sync)
        except Exception as e:  # noqa: BLE001 — any failure of one form; all failing is raised below
            if len(scopes) == 1 or (not forms and i == len(scopes) - 1):
                raise
            failed[scope] = said(e)
            continue
        live = (scope, step, data)
        del step, data  # `live` alone holds this scope's model: freed before the next is built
    return forms, failed, live


def run(cfg):
    # Eager: one form; compiled: each scope in turn, the faster kept as the reference's figure.
    scopes = forms_of(cfg)
    device = torch.device(cfg["device"])
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.set_device(device)
    sync = (lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None)
    tokens = load_tokens(cfg["tokens"])
    if cuda:
        tokens = tokens.pin_memory()
    out = {"torch_version": torch.__version__, "python": sys.version.split()[0], "device": cfg["device"],
           "device_name": torch.cuda.get_device_name(device) if cuda else "cpu",
           # the host allocator gpt2bench set for both sides (bench/runtime/memory.h)
           "malloc": {k: os.environ.get(k) for k in ("LD_PRELOAD", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")}}
    started = time.perf_counter()

    # 1. Parity: the first parity_steps losses from the seed, dropout off, on the data from its start (the first
    #    scope's form: every form computes the same step). `parity_eager`: the model uncompiled instead, where the
    #    parity only asks whether the model trains at this batch (ref_torch_compile at batch_scaling's batch, another
    #    problem than the baseline's): a compilation of its own (dropout off is another graph) spent on nothing else.
    #    Out of device memory there (the eager form at batch_scaling's batch holds more than the compiled one):
    #    said in `parity_error`, its partial figures dropped, and the timed run goes on; any other error fails it.
    if cfg["parity_steps"] > 0:
        try:
            out.update(parity_run(cfg, device, tokens, scopes))
        except OUT_OF_MEMORY as e:
            out["parity_error"] = said(e)
        if "parity_error" in out and cuda:  # the failed run's tensors went with its frame
            torch.cuda.empty_cache()

    # 2. The timed model, each scope in turn (time_forms).
    forms, failed, live = time_forms(cfg, device, tokens, scopes, started, sync)
    best = min(forms, key=lambda k: forms[k]["median_step_s"])
    # the breakdown's time was the last scope's to keep; had that one failed, the pass runs all the same
    last = forms.get(scopes[-1], {"breakdown_steps": cfg.get("breakdown_steps", 0)})
    out.update({k: v for k, v in forms[best].items() if k not in ("breakdown", "breakdown_steps")})
    out.setdefault("first_step_s", forms[best]["timed_model_first_step_s"])  # no compiled parity run: compiled here
    if cfg["compile"]:
        out["compile_scope"] = best
        out["compile_scopes"] = {k: {f: v[f] for f in ("tokens_per_sec", "median_step_s", "step_s", "steps_per_repetition",
                                                         "timed_model_first_step_s", "timed_window_s")} for k, v in forms.items()}
        out["compile_scopes"].update({k: {"error": why} for k, why in failed.items()})
    if "breakdown" in last:  # dropped for the time budget
        out["breakdown"] = last["breakdown"]
    elif last["breakdown_steps"]:  # 3. The breakdown pass, after the timed steps: profiling never perturbs them.
        live = form_alive(cfg, device, tokens, best, live)
        out["breakdown"] = breakdown(live[1], live[2], last["breakdown_steps"], cuda, sync)
    if cfg.get("pair_fds"):  # 4. The faster form's repetitions, one each time gpt2bench asks, beside its C++ rung's.
        live = form_alive(cfg, device, tokens, best, live)
        out["paired"] = paired(cfg["pair_fds"], live[1], live[2], forms[best]["steps_per_repetition"], sync)
    if cfg["compile"]:  # how many of its graphs inductor compiled and how many it took from its on-disk cache
        out["inductor_fx_graph_cache"] = fx_graph_cache_counts()
    out["elapsed_s"] = time.perf_counter() - started
    return out


def form_alive(cfg, device, tokens, form, live):
    """`live` (form, step, batches) where it is `form`'s; else that form built again (compiled: from the caches),
    the other freed first, and run one step."""
    if live is not None and live[0] == form:
        return live
    live = None
    if device.type == "cuda":
        torch.cuda.empty_cache()
    live = (form,) + build_step(cfg, device, tokens, form)[1:]
    live[1](*live[2].next())
    return live


def paired(fds, step, data, steps, sync):
    """Paired timing (docs/reference-rungs.md): "ready" on the write pipe, then for each "rep" read one repetition of
    `steps` steps, timed as timed_model's, its seconds a step written back, until "end". gpt2bench times its C++
    rung's repetitions between them, so that both sides see the same state of the machine."""
    times = []
    with os.fdopen(fds[0], "r") as asks, os.fdopen(fds[1], "w", buffering=1) as tells:
        tells.write("ready\n")
        for line in asks:
            if line.strip() != "rep":
                break
            repetition(step, data, 1, sync)  # untimed: the other side has just run, and neither pays for that
            times.append(repetition(step, data, steps, sync)[0])
            tells.write(f"{times[-1]!r}\n")
    return {"step_s": times, "steps_per_repetition": steps}


def repetition(step, data, steps, sync):
    """One timed repetition: (seconds a step over `steps` steps, one device synchronisation at its end; the last loss)."""
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step(*data.next())
    sync()
    return (time.perf_counter() - t0) / steps, loss


def fx_graph_cache_counts():
    """This process's inductor FX graph cache hits and misses (torch._dynamo's counters: a private API, so where it
    is not there, nothing): a reference compiled from caches that an earlier process warmed (--warm) reports the
    seconds of a cache hit as its first step, and says so."""
    try:
        from torch._dynamo.utils import counters
        return {"hits": int(counters["inductor"]["fxgraph_cache_hit"]), "misses": int(counters["inductor"]["fxgraph_cache_miss"])}
    except Exception:  # noqa: BLE001 — a record, never a failure of the reference
        return None


def build_step(cfg, device, tokens, scope):
    """(the model, its training step in `scope`'s form, the batches it reads)."""
    model, opt = build(cfg, device)
    return model, make_step(model, opt, scope), Batches(tokens, cfg["batch"], cfg["model"]["context"], device)


def timed_model(cfg, device, tokens, scope, share, profiled, sync):
    """One form of the step timed: (its figures, the step, its batches). `share`: seconds it may take (None: no
    budget); `profiled`: breakdown steps to leave time for, dropped first if they do not fit."""
    begun = time.perf_counter()
    model, step, data = build_step(cfg, device, tokens, scope)
    res = {"parameters": parameter_count(model)}
    del model  # the step holds it
    t0 = time.perf_counter()
    step(*data.next())
    sync()
    res["timed_model_first_step_s"] = time.perf_counter() - t0  # compiled (again: dynamo/inductor caches warm)
    warm, reps = [], cfg["repetitions"]
    for _ in range(max(1, cfg["warmup_steps"])):
        t0 = time.perf_counter()
        step(*data.next())
        sync()
        warm.append(time.perf_counter() - t0)
        if share is not None and time.perf_counter() - begun + (reps + 1) * warm[-1] > share:
            break
    res["warmup_steps"] = len(warm) + 1
    per_step, steps = min(warm), cfg["steps"]
    if share is not None:  # fit the timed steps to what is left of the share, at least one per repetition
        left = share - (time.perf_counter() - begun)
        cost = 4 * profiled * per_step  # n unprofiled steps, then n profiled ones, which run slower
        # Dropped first, as a C++ rung's pass, but only where it would cost more than the floor's timed steps (one a
        # repetition, run however short the share): the pass is the eager gap's other side, and a compilation alone
        # can take the whole share (a lent GPU's first call) while the pass costs a few steps.
        floor = reps * per_step
        if profiled and left - cost < floor and cost > floor:
            profiled, cost, res["breakdown"] = 0, 0, {"skipped": "over the time budget"}
        left -= cost
        steps = max(1, min(steps, int(left / (reps * per_step))))
    res["steps_per_repetition"], res["breakdown_steps"] = steps, profiled
    times, losses = [], []
    sync()
    began = time.monotonic()
    for _ in range(reps):
        t, loss = repetition(step, data, steps, sync)
        times.append(t)
        losses.append(float(loss))
    # When the repetitions ran, on the clock gpt2bench stamps its NVML samples with (CLOCK_MONOTONIC, std::chrono's
    # steady_clock there): it samples the device's clocks while this process runs and keeps those of this window,
    # for each form, as it does over a C++ rung's repetitions.
    res["timed_window_s"] = [began, time.monotonic()]
    res["step_s"] = times
    res["median_step_s"] = statistics.median(times)
    res["tokens_per_sec"] = cfg["batch"] * cfg["model"]["context"] / res["median_step_s"]
    res["last_losses"] = losses
    return res, step, data


WARM_FORMS = ("parity", "model", "model_and_loss")


def warm(cfg, forms):
    """torch.compile's caches filled for the compilations run(cfg) will make, so that its own, in a later process, are
    cache hits (inductor's FX graph and AOTAutograd caches, triton's kernels, on disk): each of `forms` — "parity"
    (the parity run's compiled form, dropout off) or a compile scope — built as run() builds it and compiled by one
    step on random tokens of the batch's shape; nothing timed or kept. A lent GPU's first call runs one process a
    form while our kernels' tests run (scripts/gpu_session.sh). Returns each form's seconds, or why it was passed
    over (a form run() will not compile)."""
    unknown = [f for f in forms if f not in WARM_FORMS]
    if unknown or not forms:
        raise ValueError(f"forms to warm: {unknown or 'none'} (expected some of {', '.join(WARM_FORMS)})")
    if not cfg["compile"]:
        raise ValueError(f"{cfg.get('name', 'this reference')} is not compiled: nothing to warm")
    device = torch.device(cfg["device"])
    if device.type == "cuda":
        torch.cuda.set_device(device)
    scopes = forms_of(cfg)
    b, t, v = cfg["batch"], cfg["model"]["context"], cfg["model"]["vocab_size"]
    out = {}
    for form in forms:
        if form == "parity" and (not cfg.get("parity_steps") or parity_form_of(cfg) is None):
            out[form] = "not compiled by this reference (no parity steps, or parity_eager)"
            continue
        if form != "parity" and form not in scopes:
            out[form] = f"not among its compile_scopes {scopes}"
            continue
        model, opt = build(dict(cfg, parity=form == "parity"), device)
        step = make_step(model, opt, parity_form_of(cfg) if form == "parity" else form)
        # the loader's batches: (B, T) int64, contiguous, on the device
        x, y = (torch.randint(v, (b, t), dtype=torch.int64).to(device) for _ in range(2))
        t0 = time.perf_counter()
        float(step(x, y))  # a device sync
        out[form] = time.perf_counter() - t0
        del model, opt, step
    return out


def main(argv):
    if len(argv) >= 4 and argv[1] == "--warm":
        with open(argv[2]) as f:
            cfg = json.load(f)
        print(json.dumps({"warmed": warm(cfg, argv[3:])}))
        return 0
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        cfg = json.load(f)
    out = run(cfg)
    with open(argv[2], "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
