"""The Python reference step (reference/gpt2bench_ref.py) is GPT-2 as model/gpt2.cpp builds it: the same
parameter counts for GPT-2 124M (the seed's 163,009,536 untied, 124,412,160 tied), on the meta device.
Its losses against the C++ baseline's are checked end to end by ctest (Cli.ReferenceRungsMatch...)."""
import importlib.util
import os
import time
from pathlib import Path

import pytest
import torch

_SPEC = importlib.util.spec_from_file_location(
    "gpt2bench_ref", Path(__file__).resolve().parents[2] / "reference" / "gpt2bench_ref.py")
ref = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(ref)

GPT2_124M = {"vocab_size": 50257, "padded_vocab": 50257, "context": 1024, "n_embd": 768, "n_head": 12,
             "n_layer": 12, "dropout": 0.0, "qkv_bias": False, "tie_weights": False}


def count(model_opts, sdpa=False, native=False):
    with torch.device("meta"):
        return ref.parameter_count(ref.GPT2(model_opts, sdpa=sdpa, native=native))


def test_gpt2_124m_parameter_counts():
    assert count(GPT2_124M) == 163_009_536
    assert count(dict(GPT2_124M, tie_weights=True)) == 124_412_160
    assert count(dict(GPT2_124M, padded_vocab=50304), sdpa=True, native=True) == 163_081_728


def test_canonical_order_covers_every_parameter_once():
    m = dict(GPT2_124M, n_layer=2, n_embd=64, n_head=2, context=32, vocab_size=97, padded_vocab=128)
    with torch.device("meta"):
        model = ref.GPT2(m, sdpa=False, native=False)
    names = [n for n, _ in model.canonical_parameters()]
    assert len(names) == len(set(names)) == len(list(model.parameters()))
    assert names[0] == "tok_emb.weight" and names[-1] == "head_weight"


def test_batches_follow_the_cpp_loader():
    tokens = torch.arange(25, dtype=torch.int64)
    b = ref.Batches(tokens, 2, 3, "cpu")
    x, y = b.next()
    assert x.tolist() == [[0, 1, 2], [3, 4, 5]] and y.tolist() == [[1, 2, 3], [4, 5, 6]]
    for _ in range(3):
        b.next()
    x, _ = b.next()  # at 24, 24+6+1 > 25: wraps to the start, as Loader::next does
    assert x.tolist() == [[0, 1, 2], [3, 4, 5]]


class _Event:
    """The parts of torch.profiler's FunctionEvent that by_name reads."""

    def __init__(self, name, us, scope=0, parent=None, cuda=False, annotation=False):
        self.name, self.scope, self.cpu_parent, self.is_user_annotation = name, scope, parent, annotation
        self.device_type = torch.autograd.DeviceType.CUDA if cuda else torch.autograd.DeviceType.CPU
        self.time_range = type("Interval", (), {"elapsed_us": lambda _self: us})()


def test_the_eager_gap_table_takes_what_the_cpp_collector_takes():
    # CPU: the FUNCTION scope (0) only, every depth counted, time only where no FUNCTION-scope op is above
    step = _Event("ProfilerStep#1", 900, scope=5)
    mm = _Event("aten::mm", 300, parent=step)
    bw = _Event("autograd::engine::evaluate_function: MmBackward0", 400)
    node = _Event("MmBackward0", 390, scope=1, parent=bw)  # BACKWARD_FUNCTION: not taken, nor its time
    inner = _Event("aten::mm", 350, parent=node)  # inside evaluate_function: counted, its time in its caller's
    launches, rows = ref.by_name([step, mm, bw, node, inner], 2, cuda=False)
    assert launches == 1.5
    assert rows == [{"name": "autograd::engine::evaluate_function: MmBackward0", "count_per_step": 0.5, "ms_per_step": 0.2},
                    {"name": "aten::mm", "count_per_step": 1.0, "ms_per_step": 0.15}]
    # GPU: device events only, kineto's copy names as CUPTI's, copies not launches; the optimizer's range on the
    # device is no launch (the H100 run of 2026-11-27 listed it, 1.37 ms a step, beside its own kernels)
    events = [_Event("aten::mm", 50), _Event("ampere_sgemm_128x64_tn", 120, cuda=True),
              _Event("Memcpy HtoD (Pinned -> Device)", 10, cuda=True), _Event("Memset (Device)", 2, cuda=True),
              _Event("Optimizer.step#AdamW.step", 1370, cuda=True, annotation=True)]
    launches, rows = ref.by_name(events, 1, cuda=True)
    assert launches == 1.0
    assert [r["name"] for r in rows] == ["ampere_sgemm_128x64_tn", "memcpy", "memset"]
    assert rows[1]["ms_per_step"] == 0.01


def test_a_gpu_breakdown_with_no_kernel_recorded_is_an_error_not_zeros():
    # As the C++ pass (ctest CuptiAggregation.StepsWithNoKernelRecordedAreAnErrorNotZeros): steps that ran on the GPU
    # with no kernel in torch.profiler's CUDA records are no eager-gap table. Here the steps run on the CPU, so the
    # CUDA records are empty as they are where CUPTI's collection is off.
    m = dict(GPT2_124M, n_layer=1, n_embd=32, n_head=2, context=16, vocab_size=97, padded_vocab=104)
    cfg = {"model": m, "seed": 7, "precision": "fp32", "attention": "sdpa", "layers": "native", "batch": 2,
           "optimizer": {"form": "loop", "lr": 1e-2, "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8}}
    _, step, data = ref.build_step(cfg, "cpu", torch.arange(200) % 7, None)
    got = ref.breakdown(step, data, 2, cuda=True, sync=lambda: None)
    assert got == {"source": "torch.profiler", "steps": 2, "error": "torch.profiler recorded no kernel over 2 profiled "
                   "steps: its CUDA activity collection is off in this process"}
    assert ref.breakdown(step, data, 2, cuda=False, sync=lambda: None)["events_per_step"] > 0  # the CPU's ops


def test_both_compile_scopes_train_the_same_step():
    # ref_torch_compile times torch.compile over the model alone (the loss eager after it) and over the model that
    # returns its loss; either is the reference's figure, so both must compute the same step: equal losses, fp32.
    m = dict(GPT2_124M, n_layer=1, n_embd=32, n_head=2, context=16, vocab_size=97, padded_vocab=104)
    cfg = {"model": m, "seed": 7, "precision": "fp32", "attention": "sdpa", "layers": "native", "batch": 2,
           "optimizer": {"form": "loop", "lr": 1e-2, "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8}}
    tokens = torch.arange(200) % 7  # a pattern it learns within the steps
    losses = {}
    for scope in (None, "model", "model_and_loss"):
        _, step, data = ref.build_step(cfg, "cpu", tokens, scope)
        losses[scope] = [float(step(*data.next())) for _ in range(3)]
    assert losses[None][0] > losses[None][2]  # it trains
    for scope in ("model", "model_and_loss"):
        assert losses[scope] == pytest.approx(losses[None], rel=1e-5), scope


def test_an_unknown_compile_scope_is_refused_not_run_eager():
    with pytest.raises(ValueError, match=r"compile_scopes: \['model_and_los'\]"):
        ref.run({"device": "cpu", "tokens": "/nonexistent", "batch": 1, "model": {"context": 4}, "compile": True,
                 "compile_scopes": ["model", "model_and_los"]})


def tiny_compiled(tmp_path, **overrides):
    """ref_torch_compile's config for a one-layer model on the CPU over tokens written to tmp_path (the tests that
    replace make_step run no compiler)."""
    m = dict(GPT2_124M, n_layer=1, n_embd=32, n_head=2, context=16, vocab_size=97, padded_vocab=104)
    tokens = tmp_path / "tokens"
    tokens.write_bytes((torch.arange(400) % 7).numpy().tobytes())
    cfg = {"name": "ref_torch_compile", "device": "cpu", "tokens": str(tokens), "batch": 2, "model": m, "seed": 7,
           "precision": "fp32", "attention": "sdpa", "layers": "native", "compile": True,
           "compile_scopes": ["model", "model_and_loss"], "parity_steps": 0, "warmup_steps": 1, "steps": 2,
           "repetitions": 3,
           "optimizer": {"form": "loop", "lr": 1e-3, "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8}}
    return dict(cfg, **overrides)


def test_a_compile_scope_that_fails_is_recorded_and_the_other_stands(tmp_path, monkeypatch):
    # e.g. inductor refusing the graph with the loss, or the device out of memory in it: the reference keeps the
    # other form's figures, and says why the failed one has none; every form failing fails the reference.
    cfg = tiny_compiled(tmp_path, breakdown_steps=1)
    real = ref.make_step

    def failing(model, opt, scope):
        if scope == "model_and_loss":
            raise RuntimeError("InductorError: cannot compile\n  (traceback)")
        return real(model, opt, None)  # eager for the one that stands: the test needs no compiler

    monkeypatch.setattr(ref, "make_step", failing)
    out = ref.run(cfg)
    assert out["compile_scope"] == "model"
    assert out["compile_scopes"]["model_and_loss"] == {"error": "RuntimeError: InductorError: cannot compile"}
    assert out["tokens_per_sec"] == out["compile_scopes"]["model"]["tokens_per_sec"] > 0
    assert out["breakdown"]["steps"] == 1  # the pass ran for the form that stands, though the failed one held its time
    with pytest.raises(RuntimeError, match="cannot compile"):
        ref.run(dict(cfg, compile_scopes=["model_and_loss"]))


def test_a_parity_run_out_of_device_memory_is_said_and_the_timed_run_goes_on(tmp_path, monkeypatch):
    # ref_torch_compile at batch_scaling's batch runs its parity steps eager, which holds more memory than the
    # compiled step timed after it (on the H100 the C++ top at that batch peaked at 73.6 of 80 GB): out of memory
    # there, the parity has no figures and says why; the timing stands. Any other error still fails the reference.
    cfg = tiny_compiled(tmp_path, compile_scopes=["model"], parity_steps=2, parity_eager=True)
    real = ref.make_step

    def parity_fails(error):
        def make(model, opt, scope):
            step = real(model, opt, None)  # eager: the test needs no compiler
            if scope is not None:
                return step

            def second_fails(*xy, calls=[]):
                calls.append(1)
                if len(calls) == 2:  # after one parity loss: the partial figures must not stand
                    raise error
                return step(*xy)
            return second_fails
        return make

    monkeypatch.setattr(ref, "make_step", parity_fails(ref.OUT_OF_MEMORY("CUDA out of memory. Tried to allocate 12.28 GiB.\nmore")))
    out = ref.run(cfg)
    assert out["parity_error"] == "OutOfMemoryError: CUDA out of memory. Tried to allocate 12.28 GiB."
    assert "parity_losses" not in out and "parity_form" not in out
    assert out["tokens_per_sec"] > 0 and out["compile_scope"] == "model"
    monkeypatch.setattr(ref, "make_step", parity_fails(RuntimeError("a bug")))
    with pytest.raises(RuntimeError, match="a bug"):
        ref.run(cfg)


def test_each_forms_repetitions_are_stamped_on_the_clock_of_gpt2bench_s_samples(tmp_path, monkeypatch):
    # gpt2bench samples the device's clocks (NVML) while the reference runs, stamped with CLOCK_MONOTONIC, and keeps
    # each form's samples within its timed_window_s: on the H100 one form ran half as fast as the other, and nothing
    # recorded whether the clock had dropped. The window must hold that form's repetitions, on that clock.
    cfg = tiny_compiled(tmp_path)
    real = ref.make_step
    monkeypatch.setattr(ref, "make_step", lambda model, opt, scope: real(model, opt, None))  # no compiler needed
    before = time.monotonic()
    out = ref.run(cfg)
    after = time.monotonic()
    windows = []
    for scope in ("model", "model_and_loss"):
        form = out["compile_scopes"][scope]
        t0, t1 = form["timed_window_s"]
        assert before <= t0 < t1 <= after
        assert t1 - t0 >= sum(form["step_s"]) * form["steps_per_repetition"] * (1 - 1e-9)  # every repetition in it
        windows.append((t0, t1))
    assert windows[0][1] <= windows[1][0]  # one form after the other
    assert out["timed_window_s"] == out["compile_scopes"][out["compile_scope"]]["timed_window_s"]


@pytest.mark.parametrize("parity_eager", [False, True])
def test_the_parity_run_is_compiled_unless_parity_eager(tmp_path, monkeypatch, parity_eager):
    # ref_torch_compile at batch_scaling's batch runs its parity steps uncompiled (gpt2bench sets parity_eager there:
    # the parity only asks whether the step trains, and dropout off is a compilation of its own); elsewhere the
    # parity run is the first scope's compiled step, and its first step is the compilation reported.
    cfg = tiny_compiled(tmp_path, parity_steps=2, parity_eager=parity_eager)
    real, made = ref.make_step, []

    def recording(model, opt, scope):
        made.append(scope)
        return real(model, opt, None)  # eager all the same: the test needs no compiler

    monkeypatch.setattr(ref, "make_step", recording)
    out = ref.run(cfg)
    assert made == [None if parity_eager else "model", "model", "model_and_loss"]
    assert out["parity_form"] == ("eager" if parity_eager else "model")
    assert len(out["parity_losses"]) == 2
    if parity_eager:  # the compilation reported is the faster timed form's first step, not an eager step's
        assert out["first_step_s"] == out["compile_scopes"][out["compile_scope"]]["timed_model_first_step_s"]
    else:
        assert out["first_step_s"] not in [v["timed_model_first_step_s"] for v in out["compile_scopes"].values()]


@pytest.mark.parametrize("repetitions,kept", [(9, True), (3, False)])
def test_a_spent_share_drops_the_breakdown_only_where_it_costs_more_than_the_floor(tmp_path, repetitions, kept):
    # A compilation can take a reference's whole share; its breakdown pass (4 x breakdown_steps steps' time) is kept
    # where that is no more than the floor's timed steps (one a repetition), the eager gap's other side with it.
    m = dict(GPT2_124M, n_layer=1, n_embd=32, n_head=2, context=16, vocab_size=97, padded_vocab=104)
    tokens = (torch.arange(4000) % 7).to(torch.int64)
    cfg = {"name": "ref_torch_eager", "device": "cpu", "batch": 2, "model": m, "seed": 7, "precision": "fp32",
           "attention": "sdpa", "layers": "native", "compile": False, "warmup_steps": 1, "steps": 5,
           "repetitions": repetitions,
           "optimizer": {"form": "loop", "lr": 1e-3, "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8}}
    res, _, _ = ref.timed_model(cfg, "cpu", tokens, None, share=0.0, profiled=2, sync=lambda: None)
    assert res["steps_per_repetition"] == 1  # the floor
    assert res["breakdown_steps"] == (2 if kept else 0)
    assert ("breakdown" in res) == (not kept)
    if not kept:
        assert res["breakdown"] == {"skipped": "over the time budget"}


_RUN_AND_COUNT = """
import importlib.util, json, sys
from torch._dynamo.utils import counters
spec = importlib.util.spec_from_file_location("gpt2bench_ref", sys.argv[1])
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)
out = ref.run(json.load(open(sys.argv[2])))
print(json.dumps(dict({k: counters["inductor"][k] for k in ("fxgraph_cache_hit", "fxgraph_cache_miss")},
                      recorded=out["inductor_fx_graph_cache"])))
"""


def test_warming_makes_the_references_compilations_cache_hits(tmp_path):
    # The --warm processes (one a form, beside our kernels' tests on a lent GPU) must compile exactly the graphs the
    # reference compiles later in its own process: there every compilation is then an inductor FX graph cache hit,
    # where in a cold cache every one is a miss. Each in a process of its own, as on the device.
    import json
    import os
    import shutil
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[2] / "reference" / "gpt2bench_ref.py"
    cfg = tiny_compiled(tmp_path, precision="bf16_cast", parity_steps=2, parity_eager=False, steps=1, repetitions=2,
                        breakdown_steps=0)
    cfg["model"]["dropout"] = 0.1
    cfg["optimizer"]["form"] = "fused"
    cfg_path = tmp_path / "cfg.json"
    cfg_path.write_text(json.dumps(cfg))

    def counted(cache):
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache), TRITON_CACHE_DIR=str(cache / "triton"))
        out = subprocess.run([sys.executable, "-c", _RUN_AND_COUNT, str(script), str(cfg_path)], env=env,
                             capture_output=True, text=True, check=True).stdout
        return json.loads(out.strip().splitlines()[-1])

    cold = counted(tmp_path / "cold")
    assert cold["fxgraph_cache_miss"] > 0 and cold["fxgraph_cache_hit"] == 0, cold
    # The cold run's compiled C++ kernels given to the warming (its graphs still compiled, not found): no g++ twice.
    warmed = tmp_path / "warmed"
    shutil.copytree(tmp_path / "cold", warmed, ignore=lambda d, names: [n for n in names if n in ("fxgraph", "aotautograd")])
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(warmed), TRITON_CACHE_DIR=str(warmed / "triton"))
    for form in ref.WARM_FORMS:
        said = subprocess.run([sys.executable, str(script), "--warm", str(cfg_path), form], env=env,
                              capture_output=True, text=True, check=True).stdout
        assert isinstance(json.loads(said)["warmed"][form], float), said
    hot = counted(warmed)
    assert hot["fxgraph_cache_miss"] == 0 and hot["fxgraph_cache_hit"] == cold["fxgraph_cache_miss"], (cold, hot)
    # the reference says so in its result (the report's first-step cell: "graphs from the cache")
    assert cold["recorded"] == {"hits": 0, "misses": cold["fxgraph_cache_miss"]}
    assert hot["recorded"] == {"hits": hot["fxgraph_cache_hit"], "misses": 0}


def test_warming_refuses_what_it_cannot_warm_and_passes_over_what_the_reference_does_not_compile():
    cfg = {"name": "ref_torch_eager", "compile": False, "device": "cpu"}
    with pytest.raises(ValueError, match="ref_torch_eager is not compiled: nothing to warm"):
        ref.warm(cfg, ["model"])
    with pytest.raises(ValueError, match=r"forms to warm: \['modle'\]"):
        ref.warm(dict(cfg, compile=True), ["model", "modle"])
    with pytest.raises(ValueError, match="forms to warm: none"):
        ref.warm(dict(cfg, compile=True), [])
    said = ref.warm({"compile": True, "device": "cpu", "batch": 1, "model": {"context": 4, "vocab_size": 7},
                     "compile_scopes": ["model"], "parity_steps": 2, "parity_eager": True}, ["parity", "model_and_loss"])
    assert said == {"parity": "not compiled by this reference (no parity steps, or parity_eager)",
                    "model_and_loss": "not among its compile_scopes ['model']"}


def test_paired_timing_answers_each_ask_with_one_repetition_until_told_to_end():
    # gpt2bench's side of the pipes, written ahead: two repetitions asked, then the end
    asks_r, asks_w = os.pipe()
    tells_r, tells_w = os.pipe()
    os.write(asks_w, b"rep\nrep\nend\nrep\n")
    os.close(asks_w)
    steps = []
    out = ref.paired([asks_r, tells_w], lambda x, y: steps.append(x) or torch.tensor(0.0),
                     type("Data", (), {"next": lambda self: (len(steps), 0)})(), 3, lambda: None)
    with os.fdopen(tells_r) as tells:
        said = tells.read().splitlines()
    assert said[0] == "ready" and len(said) == 3
    assert [float(s) for s in said[1:]] == out["step_s"]  # what it answered is what it records
    # one untimed step, then 3 timed, each time asked; none after "end"
    assert out["steps_per_repetition"] == 3 and steps == list(range(8))
    assert all(s > 0 for s in out["step_s"])
