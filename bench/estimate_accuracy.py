"""memscope.estimate against the real thing, on a GPU (scripts/gpu-check --run runs it).

For each workload (a decoder with hand-written attention in fp32, the same decoder with fused
attention under bf16 autocast, a conv net; AdamW throughout) it measures, each in its own
process:

- real: torch.cuda.max_memory_allocated() over the last of `steps` training steps on the GPU
  (the peak statistics reset before it), and, for the first workload, the largest batch that
  trains within a 24 GiB share of the device (torch.cuda.set_per_process_memory_fraction),
  found by doubling and bisecting;
- estimate: memscope.estimate(...).peak_allocated for the same step, and memscope.max_batch.

Prints one JSON line per measurement and a last line comparing them. Without a GPU it says so and
exits 77.

    python3 bench/estimate_accuracy.py [--max-batch]
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable

GiB = 1 << 30
CAPACITY = 24 * GiB
STEPS = 3


def decoder(batch: int, fused: bool, layers: int = 6, width: int = 512, context: int = 256,
            vocab: int = 32000) -> Callable[[], None]:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    heads = width // 64

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
            self.fc, self.out = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(c, dim=-1)
            q, k, v = (y.view(b, t, heads, c // heads).transpose(1, 2) for y in (q, k, v))
            if fused:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) / (c // heads) ** 0.5
                mask = torch.ones(t, t, device=x.device, dtype=torch.bool).tril()
                att = att.masked_fill(~mask, float("-inf")).softmax(-1)
                y = att @ v
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok = nn.Embedding(vocab, width)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.head = nn.Linear(width, vocab, bias=False)

        def forward(self, idx: torch.Tensor) -> torch.Tensor:
            x = self.tok(idx)
            for block in self.blocks:
                x = block(x)
            return self.head(x)

    model = Model().cuda()
    opt = torch.optim.AdamW(model.parameters())

    def step() -> None:
        idx = torch.randint(0, vocab, (batch, context), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=fused):
            logits = model(idx)
        loss = F.cross_entropy(logits.float().view(-1, vocab), idx.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def convnet(batch: int) -> Callable[[], None]:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    def stage(cin: int, cout: int) -> nn.Module:
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                             nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                             nn.MaxPool2d(2))

    model = nn.Sequential(stage(3, 64), stage(64, 128), stage(128, 256), stage(256, 512),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000)).cuda()
    opt = torch.optim.AdamW(model.parameters())

    def step() -> None:
        x = torch.randn(batch, 3, 128, 128, device="cuda")
        y = torch.randint(0, 1000, (batch,), device="cuda")
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


WORKLOADS: dict[str, tuple[Callable[[int], Callable[[], None]], int]] = {
    "decoder-manual-fp32": (lambda b: decoder(b, fused=False), 16),
    "decoder-sdpa-bf16": (lambda b: decoder(b, fused=True), 16),
    "convnet-fp32": (convnet, 64),
}


def real_peak(name: str, batch: int) -> int:
    return real_peaks(name, batch)[0]


def real_peaks(name: str, batch: int) -> tuple[int, int]:
    """(max_memory_allocated, max_memory_reserved) over the last step, the peaks reset after
    the warm-up steps: what memscope.estimate's peak_allocated and peak_reserved stand for."""
    import torch

    step = WORKLOADS[name][0](batch)
    for _ in range(STEPS - 1):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    return int(torch.cuda.max_memory_allocated()), int(torch.cuda.max_memory_reserved())


def trains(name: str, batch: int) -> bool:
    """Whether STEPS steps at `batch` run in a CAPACITY share of the device (a child process)."""
    code = (f"import sys; sys.path.insert(0, {sys.path[0]!r});"
            "import torch, estimate_accuracy as e;"
            f"torch.cuda.set_per_process_memory_fraction({CAPACITY} / "
            f"torch.cuda.get_device_properties(0).total_memory);"
            f"e.real_peak({name!r}, {batch})")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120,
                          check=False).returncode == 0


def real_max_batch(name: str, limit: int = 4096) -> int:
    low, high = 0, 1
    while high <= limit and trains(name, high):
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if trains(name, mid) else (low, mid)
    return low


def child(mode: str, name: str) -> None:
    batch = WORKLOADS[name][1]
    start = time.monotonic()
    if mode == "real":
        allocated, reserved = real_peaks(name, batch)
        out = {"peak_allocated": allocated, "peak_reserved": reserved}
    elif mode == "estimate":
        import memscope

        est = memscope.estimate(WORKLOADS[name][0], batch=batch, steps=STEPS, device="cuda:0",
                                capacity=CAPACITY)
        out = {"peak_allocated": est.peak_allocated, "peak_reserved": est.peak_reserved}
    elif mode == "real-max-batch":
        out = {"max_batch": real_max_batch(name)}
    else:
        import memscope

        out = {"max_batch": memscope.max_batch(WORKLOADS[name][0], capacity=CAPACITY,
                                               steps=STEPS, device="cuda:0").batch}
    out.update(workload=name, mode=mode, batch=batch, seconds=round(time.monotonic() - start, 1))
    print(json.dumps(out), flush=True)


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
        return 0
    import torch

    if not torch.cuda.is_available():
        print("no GPU: torch.cuda.is_available() is False")
        return 77
    modes = [(m, n) for n in WORKLOADS for m in ("real", "estimate")]
    if "--max-batch" in sys.argv:
        modes += [("real-max-batch", "decoder-manual-fp32"), ("max-batch", "decoder-manual-fp32")]
    results: dict[tuple[str, str], dict[str, object]] = {}
    for mode, name in modes:
        run = subprocess.run([sys.executable, __file__, "--child", mode, name],
                             capture_output=True, text=True, timeout=300, check=False)
        line = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
        if run.returncode != 0 or not line.startswith("{"):
            print(json.dumps({"workload": name, "mode": mode, "error": run.stderr[-600:]}))
            continue
        print(line, flush=True)
        results[(mode, name)] = json.loads(line)
    for name in WORKLOADS:
        real, est = results.get(("real", name)), results.get(("estimate", name))
        if real and est:
            ratio = int(est["peak_allocated"]) / int(real["peak_allocated"])  # type: ignore[call-overload]
            reserved = int(est["peak_reserved"]) / int(real["peak_reserved"])  # type: ignore[call-overload]
            print(json.dumps({"workload": name, "estimate_over_real": round(ratio, 4),
                              "reserved_estimate_over_real": round(reserved, 4)}))
    real_mb, est_mb = (results.get(("real-max-batch", "decoder-manual-fp32")),
                       results.get(("max-batch", "decoder-manual-fp32")))
    if real_mb and est_mb:
        print(json.dumps({"workload": "decoder-manual-fp32", "max_batch_real": real_mb["max_batch"],
                          "max_batch_estimate": est_mb["max_batch"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
