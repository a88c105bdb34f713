"""Hugging Face Trainer integration (imported on demand; needs transformers).

``MemoryMetricsCallback`` records per-stage memory with the Trainer's own key names
(train_mem_cpu_alloc_delta, eval_mem_gpu_peaked_delta, ...), exactly, with nested stages
(evaluation inside training keeps both right) and no polling thread:

    trainer = Trainer(model, args, ...)
    memscope.hf.MemoryMetricsCallback().attach(trainer)
    trainer.train()          # train_* (and eval_* for evaluations during training)
    trainer.evaluate()       # eval_*;   trainer.predict(ds): test_*

``attach(trainer)`` runs the stages around train(), evaluate() and predict(), where the Trainer's
own memory tracker starts and stops, logs the metrics through ``trainer.log`` (so every
reporting integration sees them), and adds them to the metrics those methods return.

Passed only as ``Trainer(callbacks=[MemoryMetricsCallback()])``, it has nothing but callback
events: "train" runs from on_train_begin to on_train_end; an evaluation or prediction is
measured from its first on_prediction_step (after its first batch: that batch's own peak can be
missed) to on_evaluate / on_predict, and the metrics are added to the dict the Trainer returns
and to ``state.log_history``. Prefer attach().
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, Optional

try:
    from transformers import TrainerCallback
except ImportError as _e:  # pragma: no cover - exercised only where transformers is absent
    raise ImportError("memscope.hf needs transformers (pip install transformers)") from _e

from ._tracking import Tracker

__all__ = ["MemoryMetricsCallback"]

logger = logging.getLogger("memscope.hf")

# Where the Trainer's TrainerMemoryTracker puts each method's numbers.
_STAGES = {"train": "train", "evaluate": "eval", "predict": "test"}
_PENDING = "prediction"  # callback-only mode: eval or test is known only when it ends
_Metrics = dict[str, Any]


def _metrics_of(result: Any) -> Optional[_Metrics]:
    """The metrics dict inside what train() / evaluate() / predict() return."""
    if isinstance(result, dict):
        return result
    metrics = getattr(result, "metrics", None)
    return metrics if isinstance(metrics, dict) else None


class MemoryMetricsCallback(TrainerCallback):
    """Exact per-stage memory metrics for a Trainer; see the module docstring.

    tracker: the Tracker to use (default: a new one with the default sources, this process's
    RSS and the current GPU's allocated bytes when there is one, without the text-valued
    *_mode metrics, which are logged once instead).
    log: also log the metrics (trainer.log when attached, else state.log_history and logging).
    """

    def __init__(self, tracker: Optional[Tracker] = None, *, log: bool = True) -> None:
        # Modes are text: Trainer integrations (TensorBoard, W&B) log scalars, so they are said
        # once in the log instead of in every metrics dict.
        self.tracker = tracker if tracker is not None else Tracker(report_modes=False)
        logger.info("memscope memory metrics: %s", self.tracker.describe_sources())
        self.log = log
        self._trainer: Any = None
        self._pending = False
        self.last_metrics: dict[str, Any] = {}

    # Exact mode ---------------------------------------------------------------------------

    def attach(self, trainer: Any) -> MemoryMetricsCallback:
        """Wraps trainer.train / evaluate / predict with stages and adds this callback."""
        if self._trainer is not None:
            raise RuntimeError("this MemoryMetricsCallback is already attached to a trainer")
        self._trainer = trainer
        if self not in trainer.callback_handler.callbacks:
            trainer.add_callback(self)
        for method, stage in _STAGES.items():
            setattr(trainer, method, self._wrap(getattr(trainer, method), stage))
        return self

    def _wrap(self, method: Callable[..., Any], stage: str) -> Callable[..., Any]:
        @functools.wraps(method)
        def run(*args: Any, **kwargs: Any) -> Any:
            if stage in self.tracker.running_stages():  # re-entered: the outer call measures
                return method(*args, **kwargs)
            self.tracker.start(stage)
            try:
                result = method(*args, **kwargs)
            finally:
                self.tracker.stop(stage)
            self._report(stage, _metrics_of(result))
            return result

        return run

    def _report(self, stage: str, returned: Optional[_Metrics], state: Any = None) -> None:
        metrics: dict[str, Any] = {}
        self.tracker.update_metrics(stage, metrics)
        self._publish(metrics, returned, state)

    def _publish(self, metrics: dict[str, Any], returned: Optional[_Metrics], state: Any) -> None:
        self.last_metrics = dict(metrics)
        if returned is not None:
            returned.update(metrics)
        if not self.log or not metrics:
            return
        if self._trainer is not None:
            self._trainer.log(dict(metrics))  # log() adds epoch/step to the dict it is given
            return
        if state is not None:
            state.log_history.append({**metrics, "step": state.global_step})
        logger.info("memory metrics: %s", metrics)

    # Callback events (stages only when not attached) --------------------------------------

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._trainer is None:
            self.tracker.start("train")

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._trainer is None and "train" in self.tracker.running_stages():
            self.tracker.stop("train")
            self._report("train", None, state)

    def on_prediction_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._trainer is None and not self._pending:
            self.tracker.start(_PENDING)
            self._pending = True

    def _finish_prediction(self, stage: str, state: Any, returned: Optional[_Metrics]) -> None:
        if self._trainer is not None or not self._pending:
            return
        self._pending = False
        self.tracker.stop(_PENDING)
        raw: dict[str, Any] = {}
        self.tracker.update_metrics(_PENDING, raw)
        prefix = _PENDING + "_"
        metrics = {(stage + "_" + k[len(prefix):]) if k.startswith(prefix) else k: v
                   for k, v in raw.items()}
        self._publish(metrics, returned, state)

    def on_evaluate(self, args: Any, state: Any, control: Any, metrics: Optional[_Metrics] = None,
                    **kwargs: Any) -> None:
        self._finish_prediction("eval", state, metrics)

    def on_predict(self, args: Any, state: Any, control: Any, metrics: Optional[_Metrics] = None,
                   **kwargs: Any) -> None:
        self._finish_prediction("test", state, metrics)
