"""memscope.hf.MemoryMetricsCallback: against a stand-in Trainer (always), and against the real
transformers Trainer on CPU where transformers and torch are installed."""

from __future__ import annotations

import collections
import importlib
import logging
import importlib.util
import sys
import time
import types

import pytest

import memscope

from conftest import MiB

# What the stand-in TrainerMemoryTracker writes: no number memscope can measure here.
OWN = -123_456_789
EVENTS = ("on_init_end", "on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end",
          "on_step_begin", "on_step_end", "on_evaluate", "on_predict", "on_save", "on_log",
          "on_prediction_step")

TrainOutput = collections.namedtuple("TrainOutput", "global_step training_loss metrics")
PredictionOutput = collections.namedtuple("PredictionOutput", "predictions label_ids metrics")


class _State:
    def __init__(self) -> None:
        self.log_history: list[dict] = []
        self.global_step = 0
        self.epoch: float | None = None


class _MemoryTracker:
    """transformers.trainer_utils.TrainerMemoryTracker's bookkeeping, writing OWN instead of
    psutil's numbers (and, like it on a machine without a GPU, only *_mem_cpu_*): a call nested
    in another stage is ignored, init goes with the first stage that reports."""

    def __init__(self, skip: bool) -> None:
        self.skip_memory_metrics, self.cur_stage, self.init_reported = skip, None, False

    def start(self, stage: str) -> None:
        if self.skip_memory_metrics or (self.cur_stage is not None and self.cur_stage != stage):
            return
        self.cur_stage = stage

    def stop_and_update_metrics(self, stage: str, metrics: dict | None = None) -> None:
        if self.skip_memory_metrics or (self.cur_stage is not None and self.cur_stage != stage):
            return
        self.cur_stage = None
        if metrics is None:  # init keeps its numbers for the first stage that reports
            return
        stages = [stage] if self.init_reported else ["init", stage]
        self.init_reported = True
        for s in stages:
            metrics[f"{s}_mem_cpu_alloc_delta"] = metrics[f"{s}_mem_cpu_peaked_delta"] = OWN
        if stages[0] == "init":
            metrics["before_init_mem_cpu"] = OWN


class _CallbackHandler:
    def __init__(self, callbacks: list) -> None:
        self.callbacks = list(callbacks)

    def call_event(self, event: str, args, state, control, **kwargs) -> None:
        for cb in self.callbacks:
            getattr(cb, event)(args, state, control, model=None, **kwargs)


class _PrinterCallback:
    """transformers.PrinterCallback (the Trainer adds it after the user's callbacks when
    disable_tqdm): it pops total_flos from the dict it is given, which train() returns."""

    def __getattr__(self, event: str):
        return lambda *args, **kwargs: None

    def on_log(self, args, state, control, logs=None, **kwargs) -> None:
        logs.pop("total_flos", None)


class FakeTrainer:
    """transformers.Trainer (5.x) in the order that matters to memscope, allocating on a sim
    device: the memory tracker's start/stop, the callback events, speed_metrics' *_runtime,
    log() (which adds epoch to the dict it is given and appends a copy to log_history) and the
    dicts train() / evaluate() / predict() return. Work between a method's start and its
    speed_metrics start time (dataloaders, setup) is a short sleep, as in the real one."""

    def __init__(self, spec: str, callbacks: list | None = None, *,
                 skip_memory_metrics: bool = True, model_bytes: int = 7 * MiB) -> None:
        self.spec = spec
        self.args = types.SimpleNamespace(skip_memory_metrics=skip_memory_metrics)
        self._memory_tracker = _MemoryTracker(skip_memory_metrics)
        self._memory_tracker.start("init")
        self.model = memscope.alloc(model_bytes, spec)  # the model, placed on the device
        self.callback_handler = _CallbackHandler(callbacks or [])
        self.add_callback(_PrinterCallback())
        self.state, self.control = _State(), None
        self.runtimes: dict[str, float] = {}  # what speed_metrics measured
        self._held: list[int] = []
        self._event("on_init_end")
        self._memory_tracker.stop_and_update_metrics("init")

    def add_callback(self, cb) -> None:
        self.callback_handler.callbacks.append(cb)

    def close(self) -> None:
        for address in [self.model, *self._held]:
            memscope.free(address, self.spec)

    def _event(self, name: str, **kwargs) -> None:
        self.callback_handler.call_event(name, self.args, self.state, self.control, **kwargs)

    def _speed_metrics(self, split: str, start_time: float) -> dict:
        runtime = round(time.time() - start_time, 4)
        self.runtimes[split] = runtime
        return {f"{split}_runtime": runtime}

    def log(self, logs: dict) -> None:
        if self.state.epoch is not None:
            logs["epoch"] = self.state.epoch
        self.state.log_history.append({**logs, "step": self.state.global_step})
        self._event("on_log", logs=logs)

    def train(self):
        self._memory_tracker.start("train")
        self._held.append(memscope.alloc(5 * MiB, self.spec))  # optimizer state
        time.sleep(0.01)
        start_time = time.time()
        self._event("on_train_begin")
        tmp = memscope.alloc(40 * MiB, self.spec)
        memscope.free(tmp)
        self.state.global_step, self.state.epoch = 2, 1.0
        self.evaluate()  # _evaluate(): through the instance, as the real one does
        metrics = self._speed_metrics("train", start_time)
        metrics["total_flos"], metrics["train_loss"] = 0.0, 1.0
        self._memory_tracker.stop_and_update_metrics("train", metrics)
        self.log(metrics)
        self._event("on_train_end")
        return TrainOutput(self.state.global_step, 1.0, metrics)

    def evaluate(self) -> dict:
        self._memory_tracker.start("eval")
        time.sleep(0.01)
        start_time = time.time()
        for _ in range(2):
            batch = memscope.alloc(10 * MiB, self.spec)
            memscope.free(batch)
            self._event("on_prediction_step")
        metrics = {"eval_loss": 2.0, **self._speed_metrics("eval", start_time)}
        self.log(metrics)
        self._event("on_evaluate", metrics=metrics)
        self._memory_tracker.stop_and_update_metrics("eval", metrics)
        return metrics

    def predict(self):
        self._memory_tracker.start("test")
        time.sleep(0.01)
        start_time = time.time()
        batch = memscope.alloc(20 * MiB, self.spec)
        memscope.free(batch)
        self._event("on_prediction_step")
        metrics = {"test_loss": 3.0, **self._speed_metrics("test", start_time)}
        self._event("on_predict", metrics=metrics)
        self._memory_tracker.stop_and_update_metrics("test", metrics)
        return PredictionOutput(None, None, metrics)


@pytest.fixture
def hf(monkeypatch: pytest.MonkeyPatch):
    """memscope.hf imported against the real transformers, or a stand-in TrainerCallback."""
    faked = importlib.util.find_spec("transformers") is None
    if faked:
        fake = types.ModuleType("transformers")
        fake.TrainerCallback = type("TrainerCallback", (),  # every event a no-op, as in the real
                                    {e: lambda self, *a, **k: None for e in EVENTS})
        monkeypatch.setitem(sys.modules, "transformers", fake)
        sys.modules.pop("memscope.hf", None)
        vars(memscope).pop("hf", None)
    yield importlib.import_module("memscope.hf")
    if faked:  # do not leave a module bound to the stand-in behind
        sys.modules.pop("memscope.hf", None)
        vars(memscope).pop("hf", None)


def _callback(hf, sim_spec: str):
    return hf.MemoryMetricsCallback(memscope.Tracker(allocators=[sim_spec]))


def _attached(hf, sim_spec: str, style: str, **kwargs) -> tuple:
    """A callback built first, then a FakeTrainer it is given to in ``style``: "callbacks"
    (Trainer(callbacks=[cb])) or "attach" (cb.attach(trainer) after construction)."""
    cb = _callback(hf, sim_spec)
    trainer = FakeTrainer(sim_spec, [cb] if style == "callbacks" else [], **kwargs)
    if style == "attach":
        cb.attach(trainer)
    return cb, trainer


def _run(trainer: FakeTrainer) -> tuple[dict, dict, dict]:
    return trainer.train().metrics, trainer.evaluate(), trainer.predict().metrics


def test_attached_stages_are_exact_and_logged(hf, sim_spec: str) -> None:
    _, trainer = _attached(hf, sim_spec, "attach")
    train, evaluated, predicted = _run(trainer)
    assert train["train_loss"] == 1.0
    assert train["train_mem_gpu_alloc_delta"] == 5 * MiB  # train() measured from its start
    assert train["train_mem_gpu_peaked_delta"] == 40 * MiB
    ours = [h for h in trainer.state.log_history if any("_mem_" in k for k in h)]
    assert ours[0]["eval_mem_gpu_peaked_delta"] == 10 * MiB  # the evaluation during training
    assert ours[1]["train_mem_gpu_peaked_delta"] == 40 * MiB
    assert evaluated["eval_mem_gpu_peaked_delta"] == 10 * MiB and evaluated["eval_loss"] == 2.0
    assert predicted["test_mem_gpu_peaked_delta"] == 20 * MiB and predicted["test_loss"] == 3.0
    trainer.close()


def test_the_trainers_runtimes_are_never_overwritten(hf, sim_spec: str) -> None:
    """Issue 10.6: attach() replaced train_runtime (2.469 s where the Trainer measured 2.241)."""
    cb = _callback(hf, sim_spec)
    trainer = FakeTrainer(sim_spec, [cb])
    train, evaluated, predicted = _run(trainer)
    assert train["train_runtime"] == trainer.runtimes["train"]
    assert evaluated["eval_runtime"] == trainer.runtimes["eval"]
    assert predicted["test_runtime"] == trainer.runtimes["test"]
    history = trainer.state.log_history  # nor in the log: runtimes there are the Trainer's only
    assert [h["train_runtime"] for h in history if "train_runtime" in h] == [train["train_runtime"]]
    assert sum("eval_runtime" in h for h in history) == 2  # the Trainer's two evaluations
    assert cb.last_metrics["test_runtime"] >= trainer.runtimes["test"]  # memscope's own, kept
    trainer.close()


@pytest.mark.parametrize("style", ["callbacks", "attach"])
def test_the_trainers_own_memory_metrics_are_kept(hf, sim_spec: str, style: str,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    """Issue 10.6: with skip_memory_metrics=False, memscope replaced the Trainer's eval_*/test_*
    memory values. Now the Trainer's stay and memscope's are named *_memscope_*, said once."""
    with caplog.at_level("INFO", logger="memscope.hf"):
        _, trainer = _attached(hf, sim_spec, style, skip_memory_metrics=False)
        train, evaluated, predicted = _run(trainer)
    for split, metrics in (("train", train), ("eval", evaluated), ("test", predicted)):
        assert metrics[f"{split}_mem_cpu_alloc_delta"] == OWN
        assert metrics[f"{split}_mem_cpu_peaked_delta"] == OWN
        assert f"{split}_mem_gpu_peaked_delta" not in metrics  # the Trainer wrote none here
        assert f"{split}_memscope_cpu_alloc_delta" in metrics
    assert train["init_mem_cpu_alloc_delta"] == OWN and train["before_init_mem_cpu"] == OWN
    assert train["init_memscope_gpu_alloc_delta"] == 7 * MiB
    assert "before_init_memscope_cpu" in train
    assert train["train_memscope_gpu_peaked_delta"] == 40 * MiB
    assert evaluated["eval_memscope_gpu_peaked_delta"] == 10 * MiB
    assert predicted["test_memscope_gpu_peaked_delta"] == 20 * MiB
    said = [r for r in caplog.records if "skip_memory_metrics=False" in r.getMessage()]
    assert len(said) == 1
    trainer.close()


@pytest.mark.parametrize("style", ["callbacks", "attach"])
def test_init_covers_the_trainers_construction(hf, sim_spec: str, style: str) -> None:
    """Issue 10.6: init_* covered "callback built -> train start" (0 bytes) and went only into
    the log entry of the first evaluation during training. Built before the Trainer, the callback
    now measures its construction, and init goes with train()'s result, as the Trainer's does."""
    _, trainer = _attached(hf, sim_spec, style, model_bytes=7 * MiB)
    train = trainer.train().metrics
    assert train["init_mem_gpu_alloc_delta"] == 7 * MiB
    assert "before_init_mem_gpu" in train
    nested = [h for h in trainer.state.log_history if "eval_mem_gpu_alloc_delta" in h]
    assert len(nested) == 1 and not any(k.startswith("init_") for k in nested[0])
    assert "init_mem_gpu_alloc_delta" not in trainer.evaluate()  # reported once
    trainer.close()


def test_both_attachment_styles_return_the_same_keys(hf, sim_spec: str) -> None:
    """Issue 10.6: with Trainer(callbacks=[cb]) the train_mem_* keys were missing from train()."""
    results = {}
    for style in ("callbacks", "attach"):
        _, trainer = _attached(hf, sim_spec, style)
        results[style] = _run(trainer)
        trainer.close()
    for by_callbacks, by_attach in zip(results["callbacks"], results["attach"]):
        assert sorted(by_callbacks) == sorted(by_attach)
        assert {k: v for k, v in by_callbacks.items() if "_mem_gpu_" in k} == {
            k: v for k, v in by_attach.items() if "_mem_gpu_" in k}
    train = results["callbacks"][0]
    assert train["train_mem_gpu_alloc_delta"] == 5 * MiB
    assert train["train_mem_gpu_peaked_delta"] == 40 * MiB


def test_attach_twice(hf, sim_spec: str, caplog: pytest.LogCaptureFixture) -> None:
    cb = _callback(hf, sim_spec)
    trainer = FakeTrainer(sim_spec, [cb])  # attached itself
    assert cb.attach(trainer) is cb
    wrapped = trainer.train
    cb.attach(trainer)
    assert trainer.train is wrapped  # not wrapped twice
    other = FakeTrainer(sim_spec)
    with pytest.raises(RuntimeError, match="already attached"):
        cb.attach(other)
    with caplog.at_level(logging.WARNING, logger="memscope.hf"):
        third = FakeTrainer(sim_spec, [cb])  # cannot attach itself twice: says so
    assert "attached to another Trainer already" in caplog.text
    for t in (trainer, other, third):
        t.close()


def test_added_after_construction_measures_from_events(hf, sim_spec: str) -> None:
    """trainer.add_callback(cb) without attach(): callback events only."""
    cb = _callback(hf, sim_spec)
    trainer = FakeTrainer(sim_spec)
    trainer.add_callback(cb)
    returned = trainer.train().metrics
    assert returned["train_mem_gpu_peaked_delta"] == 40 * MiB  # through on_log's dict
    assert returned["train_runtime"] == trainer.runtimes["train"]
    ours = [h for h in trainer.state.log_history if any("_mem_" in k for k in h)]
    assert ours[0]["eval_mem_gpu_peaked_delta"] >= 0  # from after the first batch
    assert "eval_runtime" not in ours[0]  # the Trainer's is in the eval's returned dict
    train = ours[1]
    assert train["train_mem_gpu_alloc_delta"] == 0  # setup happened before on_train_begin
    assert train["train_mem_gpu_peaked_delta"] == 40 * MiB
    metrics = trainer.evaluate()
    assert metrics["eval_loss"] == 2.0 and "eval_mem_gpu_peaked_delta" in metrics
    assert metrics["eval_runtime"] == trainer.runtimes["eval"]
    pred = trainer.predict()
    assert "test_mem_gpu_alloc_delta" in pred.metrics
    assert not any(k.startswith("prediction_") for k in pred.metrics)
    trainer.close()


_NO_DRIVER = ("the CUDA driver library 'libcuda.so.1' could not be loaded (libcuda.so.1: cannot "
              "open shared object file); install the NVIDIA driver, or point MEMSCOPE_CUDA_DRIVER "
              "at libcuda.so.1")


@pytest.mark.parametrize("no_gpu, level", [(True, logging.DEBUG), (False, logging.WARNING)])
def test_a_machine_without_a_gpu_is_not_a_problem(hf, monkeypatch: pytest.MonkeyPatch,
                                                  caplog: pytest.LogCaptureFixture,
                                                  no_gpu: bool, level: int) -> None:
    """Issue 10.11: on a CPU machine the callback said "install the NVIDIA driver" at INFO. No
    GPU is said at DEBUG; CUDA failing where a driver is present stays a WARNING."""
    monkeypatch.setattr(hf, "no_gpu_here", lambda: no_gpu)
    tracker = memscope.Tracker([memscope.host_source(),
                                memscope.unavailable_source("gpu", "cuda", _NO_DRIVER)])
    with caplog.at_level(logging.DEBUG, logger="memscope.hf"):
        hf.MemoryMetricsCallback(tracker)
    about_gpu = [r for r in caplog.records if "NVIDIA driver" in r.getMessage()]
    assert [r.levelno for r in about_gpu] == [level]
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert said == [f"memscope memory metrics: cpu: {tracker.sources()[0]['name']}, "
                    f"{tracker.sources()[0]['mode']}"]


def test_the_default_callback_says_nothing_about_drivers_at_info(
        hf, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="memscope.hf"):
        hf.MemoryMetricsCallback()
    loud = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert len(loud) == 1 and "driver" not in loud[0].lower(), loud
    if not memscope.cuda_is_available() and memscope._api.no_gpu_here():
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def _tiny_gpt2(transformers):
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100,
                                     n_positions=32, bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(config)


def test_real_trainer_on_cpu(tmp_path) -> None:
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    pytest.importorskip("accelerate", reason="the Trainer needs accelerate")

    class Data(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 32

        def __getitem__(self, i):
            ids = torch.randint(0, 100, (16,))
            return {"input_ids": ids, "labels": ids.clone()}

    def run(style: str, skip: bool):
        args = transformers.TrainingArguments(
            output_dir=str(tmp_path / f"{style}-{skip}"), max_steps=4,
            per_device_train_batch_size=8, per_device_eval_batch_size=8, eval_strategy="steps",
            eval_steps=2, report_to=[], use_cpu=True, logging_strategy="no", save_strategy="no",
            skip_memory_metrics=skip, disable_tqdm=True)
        cb = memscope.hf.MemoryMetricsCallback()  # lazily imported: no `import memscope.hf`
        trainer = transformers.Trainer(model=_tiny_gpt2(transformers), args=args,
                                       train_dataset=Data(), eval_dataset=Data(),
                                       callbacks=[cb] if style == "callbacks" else None)
        if style == "attach":
            cb.attach(trainer)
        elif style == "added":  # callback events only
            trainer.add_callback(cb)
        logged_runtimes: dict[str, list] = collections.defaultdict(list)
        out = trainer.train().metrics, trainer.evaluate(), trainer.predict(Data()).metrics
        for entry in trainer.state.log_history:
            for k, v in entry.items():
                if k.endswith("_runtime"):
                    logged_runtimes[k].append(v)
        return cb, out, logged_runtimes

    keys = {}
    for style in ("callbacks", "attach"):
        cb, (train, evaluated, predicted), logged = run(style, skip=True)
        assert "train_mem_cpu_alloc_delta" in train and "init_mem_cpu_alloc_delta" in train
        assert "train_mem_cpu_mode" not in train  # text stays out of Trainer logs
        assert "eval_mem_cpu_peaked_delta" in evaluated
        assert "test_mem_cpu_alloc_delta" in predicted
        assert logged["train_runtime"] == [train["train_runtime"]]  # the Trainer's, logged once
        assert cb.last_metrics["test_mem_cpu_alloc_delta"] == predicted["test_mem_cpu_alloc_delta"]
        keys[style] = [sorted(d) for d in (train, evaluated, predicted)]
    assert keys["callbacks"] == keys["attach"]

    _, (train, evaluated, predicted), logged = run("added", skip=True)
    assert "train_mem_cpu_peaked_delta" in train and "eval_mem_cpu_alloc_delta" in evaluated
    assert logged["train_runtime"] == [train["train_runtime"]]

    _, (train, evaluated, predicted), _ = run("callbacks", skip=False)  # the Trainer's own, too
    for split, metrics in (("train", train), ("eval", evaluated), ("test", predicted)):
        assert f"{split}_mem_cpu_alloc_delta" in metrics  # the Trainer's
        assert f"{split}_memscope_cpu_alloc_delta" in metrics  # memscope's
    assert "init_mem_cpu_alloc_delta" in train and "init_memscope_cpu_alloc_delta" in train
