"""One rank of the Trainer test under torchrun (gloo, CPU): MemoryMetricsCallback across ranks.

    trainer_worker.py <out_dir>

transformers is not needed: the stand-in Trainer of test_hf.py (FakeTrainer, which follows the
real one's order of events) runs on a simulated device, and rank r's train() additionally holds
(r+1)*2 MiB and passes through a (r+1)*50 MiB temporary, so the ranks' numbers differ in known
ways. With transformers installed the real TrainerCallback is used as the base class. Each rank
writes <out_dir>/rank<r>.json: what train() / evaluate() returned, the callback's table and
what it logged; the Trainer's output_dir is <out_dir>/trainer.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # python/tests: conftest (MiB) and test_hf

if importlib.util.find_spec("transformers") is None:  # as test_hf's `hf` fixture does
    from test_hf import EVENTS
    fake = types.ModuleType("transformers")
    fake.TrainerCallback = type("TrainerCallback", (),
                                {e: lambda self, *a, **k: None for e in EVENTS})
    sys.modules["transformers"] = fake

import torch.distributed as dist  # noqa: E402
from conftest import MiB  # noqa: E402
from test_hf import FakeTrainer  # noqa: E402

import memscope  # noqa: E402
import memscope.hf  # noqa: E402


class RankTrainer(FakeTrainer):
    def __init__(self, rank: int, *args, **kwargs) -> None:
        self.rank = rank
        super().__init__(*args, **kwargs)

    def train(self):
        self._held.append(memscope.alloc((self.rank + 1) * 2 * MiB, self.spec))
        memscope.free(memscope.alloc((self.rank + 1) * 50 * MiB, self.spec), self.spec)
        return super().train()


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def main() -> None:
    out_dir = sys.argv[1]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    records = Records()
    logging.getLogger("memscope.hf").addHandler(records)
    logging.getLogger("memscope.hf").setLevel(logging.INFO)

    spec = f"sim:{1024 + rank}MiB"  # each rank its own simulated device
    cb = memscope.hf.MemoryMetricsCallback(memscope.Tracker(allocators=[spec]),
                                           gather_timeout=60)
    trainer = RankTrainer(rank, spec, [cb])
    trainer.args.output_dir = os.path.join(out_dir, "trainer")
    train = trainer.train().metrics
    evaluate = trainer.evaluate()
    trainer.close()
    out = {"rank": rank, "train": train, "evaluate": evaluate, "logged": records.lines,
           "table": cb.rank_table.to_dict() if cb.rank_table is not None else None}
    path = os.path.join(out_dir, f"rank{rank}.json")
    with open(path, "w") as f:
        json.dump(out, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
