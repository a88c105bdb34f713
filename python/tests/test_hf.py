"""memscope.hf.MemoryMetricsCallback: against a stand-in Trainer (always), and against the real
transformers Trainer on CPU where transformers and torch are installed."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

import pytest

import memscope

from conftest import MiB


class _State:
    def __init__(self) -> None:
        self.log_history: list[dict] = []
        self.global_step = 0


class FakeTrainer:
    """Calls callbacks in the order transformers.Trainer does, allocating on a sim device."""

    def __init__(self, spec: str, callbacks: list) -> None:
        self.spec, self.state, self.logged = spec, _State(), []
        self.callback_handler = types.SimpleNamespace(callbacks=list(callbacks))

    def add_callback(self, cb) -> None:
        self.callback_handler.callbacks.append(cb)

    def _event(self, name: str, **kw) -> None:
        for cb in self.callback_handler.callbacks:
            getattr(cb, name)(None, self.state, None, **kw)

    def log(self, logs: dict) -> None:
        self.logged.append(logs)

    def train(self):
        setup = memscope.alloc(5 * MiB, self.spec)  # before on_train_begin: model to device
        self._event("on_train_begin")
        tmp = memscope.alloc(40 * MiB, self.spec)
        memscope.free(tmp)
        self.evaluate()
        self._event("on_train_end")
        return types.SimpleNamespace(metrics={"train_loss": 1.0}, setup=setup)

    def evaluate(self):
        metrics = {"eval_loss": 2.0}
        for _ in range(2):
            batch = memscope.alloc(10 * MiB, self.spec)
            memscope.free(batch)
            self._event("on_prediction_step")
        self._event("on_evaluate", metrics=metrics)
        return metrics

    def predict(self):
        out = types.SimpleNamespace(metrics={"test_loss": 3.0})
        batch = memscope.alloc(20 * MiB, self.spec)
        memscope.free(batch)
        self._event("on_prediction_step")
        self._event("on_predict", metrics=out.metrics)
        return out


@pytest.fixture
def hf(monkeypatch: pytest.MonkeyPatch):
    """memscope.hf imported against the real transformers, or a stand-in TrainerCallback."""
    faked = importlib.util.find_spec("transformers") is None
    if faked:
        fake = types.ModuleType("transformers")
        fake.TrainerCallback = type("TrainerCallback", (), {})
        monkeypatch.setitem(sys.modules, "transformers", fake)
        sys.modules.pop("memscope.hf", None)
    yield importlib.import_module("memscope.hf")
    if faked:  # do not leave a module bound to the stand-in behind
        sys.modules.pop("memscope.hf", None)
        if hasattr(memscope, "hf"):
            delattr(memscope, "hf")


def test_attached_stages_are_exact_and_logged(hf, sim_spec: str) -> None:
    cb = hf.MemoryMetricsCallback(memscope.Tracker(allocators=[sim_spec]))
    trainer = FakeTrainer(sim_spec, [])
    cb.attach(trainer)
    out = trainer.train()
    m = out.metrics
    assert m["train_loss"] == 1.0
    assert m["train_mem_gpu_alloc_delta"] == 5 * MiB  # train() measured from its start
    assert m["train_mem_gpu_peaked_delta"] == 40 * MiB
    eval_logged = trainer.logged[0]  # the nested evaluation reported first, through trainer.log
    assert eval_logged["eval_mem_gpu_peaked_delta"] == 10 * MiB
    assert eval_logged["init_mem_gpu_alloc_delta"] == 0  # init goes with the first report
    assert "init_mem_gpu_alloc_delta" not in m
    assert trainer.logged[1]["train_mem_gpu_peaked_delta"] == 40 * MiB
    pred = trainer.predict()
    assert pred.metrics["test_mem_gpu_peaked_delta"] == 20 * MiB
    assert pred.metrics["test_loss"] == 3.0
    memscope.free(out.setup, sim_spec)


def test_callback_only_mode(hf, sim_spec: str) -> None:
    cb = hf.MemoryMetricsCallback(memscope.Tracker(allocators=[sim_spec]))
    trainer = FakeTrainer(sim_spec, [cb])
    out = trainer.train()
    history = trainer.state.log_history
    assert history[0]["eval_mem_gpu_peaked_delta"] >= 0  # from after the first batch
    assert "eval_mem_gpu_alloc_delta" in history[0]
    train = history[1]
    assert train["train_mem_gpu_alloc_delta"] == 0  # setup happened before on_train_begin
    assert train["train_mem_gpu_peaked_delta"] == 40 * MiB
    metrics = trainer.evaluate()
    assert metrics["eval_loss"] == 2.0 and "eval_mem_gpu_peaked_delta" in metrics
    pred = trainer.predict()
    assert "test_mem_gpu_alloc_delta" in pred.metrics
    assert not any(k.startswith("prediction_") for k in pred.metrics)
    memscope.free(out.setup, sim_spec)


def test_real_trainer_on_cpu(tmp_path) -> None:
    pytest.importorskip("torch", reason="PyTorch is not installed")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    import torch

    import memscope.hf

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(64, 2)

        def forward(self, x, labels=None):
            logits = self.lin(x)
            loss = torch.nn.functional.cross_entropy(logits, labels)
            return {"loss": loss, "logits": logits}

    class Data(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 64

        def __getitem__(self, i):
            return {"x": torch.randn(64), "labels": torch.tensor(i % 2)}

    args = transformers.TrainingArguments(output_dir=str(tmp_path), num_train_epochs=1,
                                          per_device_train_batch_size=16, eval_strategy="epoch",
                                          report_to=[], use_cpu=True, logging_strategy="no",
                                          save_strategy="no")
    trainer = transformers.Trainer(model=Tiny(), args=args, train_dataset=Data(),
                                   eval_dataset=Data())
    cb = memscope.hf.MemoryMetricsCallback().attach(trainer)
    train_metrics = trainer.train().metrics
    assert train_metrics["train_mem_cpu_alloc_delta"] == cb.last_metrics[
        "train_mem_cpu_alloc_delta"]
    assert "train_mem_cpu_mode" not in train_metrics  # text stays out of Trainer logs
    eval_metrics = trainer.evaluate()
    assert "eval_mem_cpu_peaked_delta" in eval_metrics
    history = trainer.state.log_history
    logged = [h for h in history if "eval_mem_cpu_alloc_delta" in h]
    assert len(logged) == 2  # the evaluation during training, and the one after
    assert "init_mem_cpu_alloc_delta" in logged[0]  # with the first report, as Trainer does
    assert any("train_mem_cpu_peaked_delta" in h for h in history)

    # Callback-only: the numbers still arrive, in the returned dicts and the log history.
    plain = transformers.Trainer(model=Tiny(), args=args, train_dataset=Data(),
                                 eval_dataset=Data(),
                                 callbacks=[memscope.hf.MemoryMetricsCallback()])
    plain.train()
    assert "eval_mem_cpu_alloc_delta" in plain.evaluate()
    assert "test_mem_cpu_alloc_delta" in plain.predict(Data()).metrics
    assert any("train_mem_cpu_alloc_delta" in h for h in plain.state.log_history)
    assert cb.last_metrics["eval_mem_cpu_alloc_delta"] == eval_metrics["eval_mem_cpu_alloc_delta"]
