"""A GPT-2-like decoder and its AdamW training step, written for "cuda" and unmodified: the
workload `memscope estimate` (and `make demo`) estimates on a machine without a GPU.

    memscope estimate examples/python/estimate_gpt.py:workload --batch 8 --capacity 24GiB --max-batch
"""

from __future__ import annotations

import os
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

LAYERS = int(os.environ.get("GPT_LAYERS", "12"))
WIDTH = int(os.environ.get("GPT_WIDTH", "768"))
CONTEXT = int(os.environ.get("GPT_CONTEXT", "512"))
VOCAB = int(os.environ.get("GPT_VOCAB", "50304"))
HEADS = max(1, WIDTH // 64)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(WIDTH)
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)
        self.ln2 = nn.LayerNorm(WIDTH)
        self.fc = nn.Linear(WIDTH, 4 * WIDTH)
        self.out = nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=-1)
        q, k, v = (y.view(b, t, HEADS, c // HEADS).transpose(1, 2) for y in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tok = nn.Embedding(VOCAB, WIDTH)
        self.pos = nn.Embedding(CONTEXT, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def workload(batch: int) -> Callable[[], None]:
    model = GPT().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)

    def train_step() -> None:
        x = torch.randint(0, VOCAB, (batch, CONTEXT), device="cuda")
        y = torch.randint(0, VOCAB, (batch, CONTEXT), device="cuda")
        loss = F.cross_entropy(model(x).view(-1, VOCAB), y.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return train_step
