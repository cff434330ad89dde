"""The Python reference step (reference/gpt2bench_ref.py) is GPT-2 as model/gpt2.cpp builds it: the same
parameter counts for GPT-2 124M (the seed's 163,009,536 untied, 124,412,160 tied), on the meta device.
Its losses against the C++ baseline's are checked end to end by ctest (Cli.ReferenceRungsMatch...)."""
import importlib.util
from pathlib import Path

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
