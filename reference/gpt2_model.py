"""The reference rungs' GPT-2 model in Python PyTorch (reference/gpt2bench_ref.py runs it), kept equivalent to
model/gpt2.cpp and model/layers.cpp: the same modules, parameter count and initialisation (one CPU generator
seeded as init_weights is, drawing in canonical_parameters' order)."""
import math

import torch
import torch.nn.functional as F
from torch import nn


class LayerNorm(nn.Module):
    def __init__(self, dim, native):
        super().__init__()
        self.dim, self.native = dim, native
        self.scale = nn.Parameter(torch.ones(dim))
        self.shift = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        if self.native:
            return F.layer_norm(x, (self.dim,), self.scale, self.shift, 1e-5)
        mean = x.mean(-1, keepdim=True)
        var = x.var(-1, unbiased=False, keepdim=True)
        return self.scale * ((x - mean) / torch.sqrt(var + 1e-5)) + self.shift


def gelu_tanh_scratch(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3))))


class FeedForward(nn.Module):
    def __init__(self, c, native):
        super().__init__()
        self.native = native
        self.fc1 = nn.Linear(c, 4 * c)
        self.fc2 = nn.Linear(4 * c, c)

    def forward(self, x):
        h = self.fc1(x)
        return self.fc2(F.gelu(h, approximate="tanh") if self.native else gelu_tanh_scratch(h))


class CausalSelfAttention(nn.Module):
    def __init__(self, m, sdpa):
        super().__init__()
        c = m["n_embd"]
        self.n_head, self.head_dim, self.sdpa, self.dropout = m["n_head"], c // m["n_head"], sdpa, m["dropout"]
        self.query = nn.Linear(c, c, bias=m["qkv_bias"])
        self.key = nn.Linear(c, c, bias=m["qkv_bias"])
        self.value = nn.Linear(c, c, bias=m["qkv_bias"])
        self.out_proj = nn.Linear(c, c)
        self.attn_dropout = nn.Dropout(m["dropout"])
        if not sdpa:
            self.register_buffer("mask", torch.triu(torch.ones(m["context"], m["context"]), diagonal=1))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (p(x).view(b, t, self.n_head, self.head_dim).transpose(1, 2) for p in (self.query, self.key, self.value))
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True)
        else:
            scores = q @ k.transpose(2, 3)
            scores.masked_fill_(self.mask.bool()[:t, :t], -math.inf)
            y = self.attn_dropout(torch.softmax(scores / math.sqrt(self.head_dim), dim=-1)) @ v
        return self.out_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self, m, sdpa, native):
        super().__init__()
        self.ln1, self.ln2 = LayerNorm(m["n_embd"], native), LayerNorm(m["n_embd"], native)
        self.attn = CausalSelfAttention(m, sdpa)
        self.ff = FeedForward(m["n_embd"], native)
        self.drop_resid = nn.Dropout(m["dropout"])

    def forward(self, x):
        x = x + self.drop_resid(self.attn(self.ln1(x)))
        return x + self.drop_resid(self.ff(self.ln2(x)))


class GPT2(nn.Module):
    def __init__(self, m, sdpa, native):
        super().__init__()
        self.m = m
        vp, c = m["padded_vocab"], m["n_embd"]
        self.tok_emb = nn.Embedding(vp, c)
        self.pos_emb = nn.Embedding(m["context"], c)
        self.drop_emb = nn.Dropout(m["dropout"])
        self.blocks = nn.ModuleList(Block(m, sdpa, native) for _ in range(m["n_layer"]))
        self.final_norm = LayerNorm(c, native)
        self.head_weight = self.tok_emb.weight if m["tie_weights"] else nn.Parameter(torch.empty(vp, c))

    def forward(self, idx):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.drop_emb(self.tok_emb(idx) + self.pos_emb(pos))
        for b in self.blocks:
            x = b(x)
        return F.linear(self.final_norm(x), self.head_weight)

    def canonical_parameters(self):
        """model/gpt2.cpp's canonical_parameters: the order init_weights draws in (padded rows left out)."""
        m, v = self.m, self.m["vocab_size"]
        out = [("tok_emb.weight", self.tok_emb.weight[:v]), ("pos_emb.weight", self.pos_emb.weight)]
        for i, b in enumerate(self.blocks):
            p = f"blocks.{i}."
            out += [(p + "ln1.scale", b.ln1.scale), (p + "ln1.shift", b.ln1.shift)]
            for name in ("query", "key", "value"):
                lin = getattr(b.attn, name)
                out.append((p + f"attn.{name}.weight", lin.weight))
                if m["qkv_bias"]:
                    out.append((p + f"attn.{name}.bias", lin.bias))
            out += [(p + "attn.out_proj.weight", b.attn.out_proj.weight), (p + "attn.out_proj.bias", b.attn.out_proj.bias),
                    (p + "ln2.scale", b.ln2.scale), (p + "ln2.shift", b.ln2.shift),
                    (p + "ff.fc1.weight", b.ff.fc1.weight), (p + "ff.fc1.bias", b.ff.fc1.bias),
                    (p + "ff.fc2.weight", b.ff.fc2.weight), (p + "ff.fc2.bias", b.ff.fc2.bias)]
        out += [("final_norm.scale", self.final_norm.scale), ("final_norm.shift", self.final_norm.shift)]
        if not m["tie_weights"]:
            out.append(("head_weight", self.head_weight[:v]))
        return out

    @torch.no_grad()
    def init_weights(self, seed):
        """model/gpt2.cpp's init_weights, draw for draw."""
        gen = torch.Generator().manual_seed(seed)
        self.tok_emb.weight.zero_()
        if not self.m["tie_weights"]:
            self.head_weight.zero_()
        for name, view in self.canonical_parameters():
            cpu = torch.empty(view.shape, dtype=torch.float32)
            tied_head = self.m["tie_weights"] and name == "tok_emb.weight"
            if name.endswith("emb.weight") and not tied_head:
                cpu.normal_(0.0, 1.0, generator=gen)
            elif name.endswith(".scale"):
                cpu.fill_(1.0)
            elif name.endswith(".shift"):
                cpu.fill_(0.0)
            else:
                if name.endswith(".bias"):
                    fan_in = self.m["n_embd"] * (4 if "fc2" in name else 1)
                else:
                    fan_in = view.shape[1]
                bound = 1.0 / math.sqrt(fan_in)
                cpu.uniform_(-bound, bound, generator=gen)
            view.copy_(cpu)
