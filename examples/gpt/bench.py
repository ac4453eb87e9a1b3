"""A small GPT-style training benchmark profiled with perfci.

Runs on CUDA when present, otherwise on the CPU. ``--slow-attention`` (or
``PERFCI_EXAMPLE_SLOW_ATTENTION=1``) swaps the fused attention kernel for an unfused,
per-head implementation: a genuine slowdown that perfci should catch and attribute.

    perfci run --benchmark gpt-tiny --repeats 3 -- python examples/gpt/bench.py
"""

from __future__ import annotations

import argparse
import math
import os

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812 - the conventional alias

from perfci.integrations.torch import profile_steps

#: The defaults of ``--gelu-extra`` and ``--linear-extra``: a pull request that slows one
#: operator edits one of these lines.
GELU_EXTRA = 0.0
LINEAR_EXTRA = 0.0
#: The width of the attention's value projection (``None``: the model's width). A pull request
#: that widens it changes one linear layer's shape, and with it the backend ATen picks for
#: attention: its flash kernels want values as wide per head as queries, so the CPU runs
#: ``aten::_scaled_dot_product_attention_math`` instead of ``…_flash_attention_for_cpu``.
VALUE_DIM: int | None = None


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int, slow: bool, value_dim: int | None = None) -> None:
        super().__init__()
        self.heads = heads
        self.value_dim = value_dim or dim
        self.qkv = nn.Linear(dim, 2 * dim + self.value_dim)
        self.proj = nn.Linear(self.value_dim, dim)
        self.slow = slow

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        q, k, v = self.qkv(x).split([dim, dim, self.value_dim], dim=2)
        q, k = (t.view(batch, seq, self.heads, -1).transpose(1, 2) for t in (q, k))
        v = v.view(batch, seq, self.heads, -1).transpose(1, 2)
        if self.slow:
            out = self._unfused(q, k, v)
        else:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(out.transpose(1, 2).reshape(batch, seq, self.value_dim))

    @staticmethod
    def _unfused(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        # One head at a time, materialising the full score matrix: what a fused kernel avoids.
        seq = q.shape[2]
        mask = torch.triu(torch.ones(seq, seq, dtype=torch.bool, device=q.device), 1)
        heads = []
        for h in range(q.shape[1]):
            with torch.profiler.record_function("unfused_attention_head"):
                scores = q[:, h] @ k[:, h].transpose(-2, -1) / math.sqrt(q.shape[-1])
                scores = scores.masked_fill(mask, float("-inf"))
                heads.append(torch.softmax(scores.float(), dim=-1).to(v.dtype) @ v[:, h])
        return torch.stack(heads, dim=1)


class WastefulGELU(nn.Module):
    """GELU that also runs over an ``extra`` share of its input again, result unused.

    A small, deliberate regression of a single operator: ``aten::gelu`` does that much more
    work and nothing else changes (the wasted call needs no backward). It stands for a
    careless change, for measuring what perfci can find (``benchmarks/ab_noise.py --bench
    gpt``).
    """

    def __init__(self, extra: float) -> None:
        super().__init__()
        self.extra = extra

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.gelu(x)
        with torch.no_grad():
            F.gelu(x.reshape(-1)[: max(1, round(x.numel() * self.extra))])
        return out


class WastefulLinear(nn.Linear):
    """A linear layer that also runs over an ``extra`` share of its input rows again, unused.

    The same kind of deliberate regression on the example's largest forward operator:
    ``aten::addmm`` gets one more, smaller call; parameters, values and gradients stay the
    layer's own.
    """

    def __init__(self, in_features: int, out_features: int, extra: float) -> None:
        super().__init__(in_features, out_features)
        self.extra = extra

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = super().forward(x)
        with torch.no_grad():
            rows = x.reshape(-1, x.shape[-1])
            F.linear(rows[: max(1, round(rows.shape[0] * self.extra))], self.weight, self.bias)
        return out


class Block(nn.Module):
    def __init__(
        self,
        dim: int,
        heads: int,
        slow: bool,
        gelu_extra: float = 0.0,
        linear_extra: float = 0.0,
        value_dim: int | None = None,
    ) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, slow, value_dim)
        self.ln2 = nn.LayerNorm(dim)
        act = WastefulGELU(gelu_extra) if gelu_extra > 0 else nn.GELU()
        up = (
            WastefulLinear(dim, 4 * dim, linear_extra)
            if linear_extra > 0
            else nn.Linear(dim, 4 * dim)
        )
        self.mlp = nn.Sequential(up, act, nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(
        self,
        vocab: int,
        dim: int,
        heads: int,
        layers: int,
        seq: int,
        slow: bool,
        gelu_extra: float = 0.0,
        linear_extra: float = 0.0,
        value_dim: int | None = None,
    ) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(
            Block(dim, heads, slow, gelu_extra, linear_extra, value_dim) for _ in range(layers)
        )
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(positions)
        for i, block in enumerate(self.blocks):
            with torch.profiler.record_function(f"layer_{i}"):
                x = block(x)
        return self.head(self.ln(x))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--slow-attention",
        action="store_true",
        default=os.environ.get("PERFCI_EXAMPLE_SLOW_ATTENTION") == "1",
    )
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument(
        "--gelu-extra",
        type=float,
        default=GELU_EXTRA,
        help="make the MLP's GELU do this fraction more work, wasted (e.g. 0.05: +5 %%)",
    )
    parser.add_argument(
        "--linear-extra",
        type=float,
        default=LINEAR_EXTRA,
        help="make the MLP's first linear layer run over this share of its rows again, wasted "
        "(a third of the aten::addmm work in each block: 0.15 is about +5 %% addmm)",
    )
    parser.add_argument(
        "--value-dim",
        type=int,
        default=VALUE_DIM,
        help="width of attention's value projection (default: --dim); wider values make "
        "the CPU's attention leave its flash kernel for the math one",
    )
    parser.add_argument(
        "--no-steady-memory",
        action="store_true",
        help="leave glibc's allocator alone on the CPU (to measure the page faults it costs)",
    )
    args = parser.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)  # steadier timings on shared CI CPUs
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = TinyGPT(
        512,
        args.dim,
        args.heads,
        args.layers,
        args.seq,
        args.slow_attention,
        args.gelu_extra,
        args.linear_extra,
        args.value_dim,
    )
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = torch.randint(0, 512, (args.batch, args.seq + 1), device=device)

    with profile_steps(
        warmup=args.warmup,
        active=args.steps,
        label="gpt",
        steady_memory=not args.no_steady_memory,
    ) as run:
        for _ in run:
            with torch.profiler.record_function("forward"):
                logits = model(data[:, :-1])
                loss = F.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]), data[:, 1:].reshape(-1)
                )
            with torch.profiler.record_function("backward"):
                loss.backward()
            with torch.profiler.record_function("optimizer"):
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
    print(f"wrote {run.trace_path} ({device}, slow_attention={args.slow_attention})")


if __name__ == "__main__":
    main()
