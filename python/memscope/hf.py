"""Hugging Face Trainer integration (imported on demand; needs transformers).

``MemoryMetricsCallback`` records per-stage memory with the Trainer's own key names
(train_mem_cpu_alloc_delta, eval_mem_gpu_peaked_delta, ...), exactly, with nested stages
(evaluation inside training keeps both right) and no polling thread. Build it before the
Trainer, so that its ``init_*`` covers the Trainer's construction, and pass it in or attach it:

    cb = memscope.hf.MemoryMetricsCallback()
    trainer = Trainer(model, args, ..., callbacks=[cb])   # or Trainer(...); cb.attach(trainer)
    trainer.train()          # train_* (and init_* once); eval_* for evaluations during training
    trainer.evaluate()       # eval_*;   trainer.predict(ds): test_*

Both ways measure the same stages and return the same keys: the callback finds the Trainer that
constructs it (on_init_end) and attaches itself. Attached, it runs the stages around train(),
evaluate() and predict(), where the Trainer's own memory tracker starts and stops, adds the
metrics to the dict those methods return, and logs them through ``trainer.log`` (so every
reporting integration sees them).

What it writes, and what it never does:

- ``init_*`` (and ``before_init_mem_*``) go once, with the first train() / evaluate() /
  predict() result, as the Trainer reports its own; they cover the time from the callback's
  construction to the end of the Trainer's construction (for one that did not see the Trainer
  being built: to ``attach()``, or to the first stage). Evaluations during training are
  reported in their own log entries, without init.
- A key the Trainer wrote is never overwritten: ``train_runtime``, ``eval_runtime`` and
  ``test_runtime`` stay the Trainer's (memscope's own runtimes are in ``last_metrics``).
- With the Trainer's own memory tracker on (``skip_memory_metrics=False``), its ``*_mem_*``
  values stay in place and memscope's go under ``*_memscope_*`` (``eval_memscope_cpu_alloc_delta``,
  ``before_init_memscope_cpu``), said once in the log.

In a distributed run (torch.distributed initialised with more than one rank; the Trainer calls
the callback on every rank) each stage's metrics are gathered across ranks
(``memscope.distributed.gather``): rank 0 logs the cross-rank table, its Trainer dicts (and so
``all_results.json``) get the reduction, each key as its max over ranks with ``{key}_rank`` (the
rank holding it), ``{key}_min`` and ``{key}_mean``, and every rank's own values go to
``<output_dir>/memscope_ranks.json``; the other ranks' dicts keep their own values.
See docs/distributed.md.

Added with ``trainer.add_callback()`` after construction and never attached, it has nothing but
callback events: "train" runs from on_train_begin to the Trainer's final log of train()'s
metrics (else on_train_end); an evaluation or prediction is measured from its first
on_prediction_step (after its first batch: that batch's own peak can be missed) to on_evaluate /
on_predict. The metrics are added to the dict the Trainer returns and to ``state.log_history``.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import os
import sys
from collections.abc import Callable
from typing import Any, Optional

try:
    from transformers import TrainerCallback
except ImportError as _e:  # pragma: no cover - exercised only where transformers is absent
    raise ImportError("memscope.hf needs transformers (pip install transformers)") from _e

from . import distributed
from ._api import no_gpu_here
from ._tracking import Tracker

__all__ = ["MemoryMetricsCallback"]

logger = logging.getLogger("memscope.hf")

# Where the Trainer's TrainerMemoryTracker puts each method's numbers.
_STAGES = {"train": "train", "evaluate": "eval", "predict": "test"}
_PENDING = "prediction"  # callback-only mode: eval or test is known only when it ends
_OURS = frozenset([*_STAGES.values(), _PENDING])
_Metrics = dict[str, Any]
RANKS_FILE = "memscope_ranks.json"  # every rank's values, next to all_results.json


def _metrics_of(result: Any) -> Optional[_Metrics]:
    """The metrics dict inside what train() / evaluate() / predict() return."""
    if isinstance(result, dict):
        return result
    metrics = getattr(result, "metrics", None)
    return metrics if isinstance(metrics, dict) else None


def _owns(candidate: Any, callback: Any) -> bool:
    try:
        callbacks = candidate.callback_handler.callbacks
        return any(c is callback for c in callbacks)
    except Exception:  # any object can be a frame's `self`: then it is not our Trainer
        return False


def _find_trainer(callback: Any, max_depth: int = 32) -> Any:
    """The Trainer whose construction is calling ``callback`` (on_init_end), found as the
    ``self`` of a calling frame whose callback handler holds it; None where there is none."""
    frame = inspect.currentframe()
    try:
        for _ in range(max_depth):
            if frame is None:
                return None
            owner = frame.f_locals.get("self")
            if owner is not None and owner is not callback and _owns(owner, callback):
                return owner
            frame = frame.f_back
        return None
    finally:
        del frame


def _trainer_tracks_memory(trainer: Any, args: Any) -> bool:
    """Whether the Trainer's own TrainerMemoryTracker writes *_mem_* keys (it skips itself
    without psutil, so ask it where we can)."""
    own = getattr(trainer, "_memory_tracker", None)
    if own is not None and hasattr(own, "skip_memory_metrics"):
        return not own.skip_memory_metrics
    return args is not None and getattr(args, "skip_memory_metrics", True) is False


def _log_sources(tracker: Tracker) -> None:
    """Says once what is measured. A machine without a GPU is not a problem (DEBUG); a GPU source
    that fails where a driver is present, or any other unavailable source, is (WARNING)."""
    if not tracker.enabled:
        logger.info("memscope memory metrics: skipped")
        return
    measured = []
    for s in tracker.sources():
        if s["available"]:
            measured.append(f"{s['label']}: {s['name']}, {s['mode']}")
            continue
        level = logging.DEBUG if s["kind"] == "gpu" and no_gpu_here() else logging.WARNING
        logger.log(level, "memscope: no %s memory metrics: %s %s", s["label"], s["name"], s["mode"])
    logger.info("memscope memory metrics: %s", "; ".join(measured) or "no memory sources")


class MemoryMetricsCallback(TrainerCallback):
    """Exact per-stage memory metrics for a Trainer; see the module docstring.

    tracker: the Tracker to use (default: a new one with the default sources, this process's
    RSS and the current GPU's allocated bytes when there is one; its metrics are numbers only,
    and how each source measures is logged once).
    log: also log the metrics (trainer.log when attached, else state.log_history and logging).
    last_metrics: everything memscope measured at its last report, runtimes included, under
    memscope's own names.
    across_ranks: gather each stage's metrics over the ranks (None: when torch.distributed is
    initialised with more than one rank). Every rank must run the same stages, as the Trainer
    does; a rank that does not reach a gather within ``gather_timeout`` seconds makes the others
    raise memscope.distributed.GatherTimeout naming it.
    rank_table: on rank 0, the last cross-rank table (memscope.distributed.RankTable).
    """

    def __init__(self, tracker: Optional[Tracker] = None, *, log: bool = True,
                 across_ranks: Optional[bool] = None,
                 gather_timeout: float = distributed.DEFAULT_TIMEOUT) -> None:
        # Trainer integrations (TensorBoard, W&B) log scalars: the default Tracker's metrics are
        # numbers only, and how each source measures is said once in the log instead.
        self.tracker = tracker if tracker is not None else Tracker()
        _log_sources(self.tracker)
        self.log = log
        self._trainer: Any = None
        self._pending = False
        self._said_renamed = False
        self.last_metrics: dict[str, Any] = {}
        self.across_ranks = across_ranks
        self.gather_timeout = gather_timeout
        self.rank_table: Optional[distributed.RankTable] = None

    # Exact mode ---------------------------------------------------------------------------

    def attach(self, trainer: Any) -> MemoryMetricsCallback:
        """Wraps trainer.train / evaluate / predict with stages and adds this callback. Attaching
        again to the same trainer does nothing (the callback may have attached itself)."""
        if self._trainer is trainer:
            return self
        if self._trainer is not None:
            raise RuntimeError("this MemoryMetricsCallback is already attached to a trainer")
        self._end_init()
        self._trainer = trainer
        if not _owns(trainer, self):
            trainer.add_callback(self)
        for method, stage in _STAGES.items():
            setattr(trainer, method, self._wrap(getattr(trainer, method), stage))
        return self

    def _end_init(self) -> None:
        if "init" in self.tracker.running_stages():
            self.tracker.stop("init")

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
            self._report(stage, stage, _metrics_of(result), None, None)
            return result

        return run

    def _report(self, stage: str, name: str, returned: Optional[_Metrics], state: Any,
                args: Any) -> None:
        """Reports the finished ``stage`` as ``name`` (they differ for a pending prediction)."""
        metrics: dict[str, Any] = {}
        if _OURS.intersection(self.tracker.running_stages()):
            # Nested (an evaluation during training): its own entry; init goes with the outer one.
            metrics.update(self.tracker.stage_metrics(stage))
        else:
            self.tracker.update_metrics(stage, metrics)
        if name != stage:
            prefix = stage + "_"
            metrics = {(name + "_" + k[len(prefix):]) if k.startswith(prefix) else k: v
                       for k, v in metrics.items()}
        self.last_metrics = dict(metrics)
        ours = self._for_trainer(metrics, returned, args)
        if self._distributed():
            ours = self._reduce_over_ranks(ours, returned, args)
        self._publish(ours, returned, state)

    def _for_trainer(self, metrics: _Metrics, returned: Optional[_Metrics], args: Any) -> _Metrics:
        """memscope's metrics as they may go into the Trainer's dicts: never over a key the
        Trainer wrote, and under *_memscope_* when its own memory tracker is on."""
        if _trainer_tracks_memory(self._trainer, args):
            if not self._said_renamed:
                self._said_renamed = True
                logger.info("the Trainer's own memory tracker is on (skip_memory_metrics=False): "
                            "its *_mem_* metrics stay, memscope's are named *_memscope_*")
            metrics = {k.replace("_mem_", "_memscope_", 1): v for k, v in metrics.items()}
        if returned is None:
            return metrics
        kept = {k: v for k, v in metrics.items() if k not in returned}
        if len(kept) < len(metrics):
            logger.debug("memscope leaves the Trainer's %s as they are (its own: %s)",
                         sorted(set(metrics) - set(kept)), self.last_metrics)
        return kept

    # Across ranks ---------------------------------------------------------------------------

    def _distributed(self) -> bool:
        if self.across_ranks is not None:
            return self.across_ranks
        if "torch" not in sys.modules:  # a run that never loaded torch is not distributed
            return False
        import torch.distributed as dist
        return bool(dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1)

    def _reduce_over_ranks(self, metrics: _Metrics, returned: Optional[_Metrics],
                           args: Any) -> _Metrics:
        """Gathers the numbers to rank 0; there: logs the table, writes every rank's values to
        memscope_ranks.json and returns the reduction (max, {key}_rank, _min, _mean) in place of
        rank 0's own values. Other ranks keep theirs."""
        numbers = {k: v for k, v in metrics.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool)}
        table = distributed.gather(numbers, dst=0, timeout=self.gather_timeout)
        if table is None:
            return metrics
        self.rank_table = table
        logger.info("memory metrics across ranks:\n%s", table.format())
        out = dict(metrics)
        for key, r in table.reductions.items():
            out[key] = r.max
            out.update({key + "_rank": r.argmax, key + "_min": r.min, key + "_mean": r.mean})
        if returned is not None:  # never over a key the Trainer wrote
            out = {k: v for k, v in out.items() if k in metrics or k not in returned}
        self._write_ranks(table, args)
        return out

    def _write_ranks(self, table: distributed.RankTable, args: Any) -> None:
        """Merges every rank's values into <output_dir>/memscope_ranks.json (atomically; a
        file from a run with another world size is replaced)."""
        if args is None and self._trainer is not None:
            args = getattr(self._trainer, "args", None)
        output_dir = getattr(args, "output_dir", None)
        if not output_dir:
            logger.debug("memscope: no output_dir, per-rank metrics not saved")
            return
        path = os.path.join(output_dir, RANKS_FILE)
        ranks: list[dict[str, Any]] = [{} for _ in range(table.world_size)]
        try:
            with open(path) as f:
                old = json.load(f)
            if old.get("world_size") == table.world_size:
                ranks = [dict(r) for r in old["ranks"]]
        except (OSError, ValueError, KeyError, TypeError):
            pass  # no file yet, or not ours: start afresh
        for mine, new in zip(ranks, table.ranks, strict=True):
            mine.update(new)
        os.makedirs(output_dir, exist_ok=True)
        with open(path + ".tmp", "w") as f:
            json.dump({"world_size": table.world_size, "ranks": ranks}, f, indent=2,
                      sort_keys=True)
        os.replace(path + ".tmp", path)

    def _publish(self, metrics: _Metrics, returned: Optional[_Metrics], state: Any) -> None:
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

    def on_init_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """The Trainer that holds this callback is built: init ends here, and the callback
        attaches itself to that Trainer (found from the calling frames) when it can."""
        self._end_init()
        trainer = _find_trainer(self)
        if self._trainer is None and trainer is not None:
            self.attach(trainer)
        elif self._trainer is None:
            logger.debug("memscope: no Trainer found in the frames calling on_init_end; "
                         "measuring from callback events")
        elif trainer is not self._trainer:
            logger.warning("this MemoryMetricsCallback is attached to another Trainer already; "
                           "build one callback per Trainer to measure this one")

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._trainer is None:
            self.tracker.start("train")

    def on_log(self, args: Any, state: Any, control: Any, logs: Optional[_Metrics] = None,
               **kwargs: Any) -> None:
        # The Trainer logs train()'s final metrics (train_runtime and train_loss together only
        # there; PrinterCallback may have popped total_flos) with the very dict train() returns,
        # just before on_train_end: train ends there, so its numbers reach that dict too.
        if (self._trainer is None and logs is not None and "train" in self.tracker.running_stages()
                and {"train_runtime", "train_loss"} <= logs.keys()):
            self.tracker.stop("train")
            self._report("train", "train", logs, state, args)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._trainer is None and "train" in self.tracker.running_stages():
            self.tracker.stop("train")
            self._report("train", "train", None, state, args)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        # An iteration boundary for memscope.torch.track_growth() (docs/oom.md); a no-op
        # without it, and nothing is imported for it.
        memscope_torch = sys.modules.get("memscope.torch")
        if memscope_torch is not None:
            memscope_torch.step()

    def on_prediction_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._trainer is None and not self._pending:
            self.tracker.start(_PENDING)
            self._pending = True

    def _finish_prediction(self, name: str, state: Any, args: Any,
                           returned: Optional[_Metrics]) -> None:
        if self._trainer is not None or not self._pending:
            return
        self._pending = False
        self.tracker.stop(_PENDING)
        self._report(_PENDING, name, returned, state, args)

    def on_evaluate(self, args: Any, state: Any, control: Any, metrics: Optional[_Metrics] = None,
                    **kwargs: Any) -> None:
        self._finish_prediction("eval", state, args, metrics)

    def on_predict(self, args: Any, state: Any, control: Any, metrics: Optional[_Metrics] = None,
                   **kwargs: Any) -> None:
        self._finish_prediction("test", state, args, metrics)
