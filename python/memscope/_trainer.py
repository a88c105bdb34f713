"""A transformers ``Trainer`` as a memscope.estimate workload: its model, its TrainingArguments
(per-device batch, bf16/fp16, gradient checkpointing, optimizer, gradient accumulation, gradient
clipping) and one batch from its data collator, run as the Trainer's own training step would
run on the GPU.

The trainer is not changed: the capture trains a copy of its model whose tensors are fake (a
deep copy made inside the capture's fake mode costs no memory), with an optimizer made the way
``Trainer.create_optimizer`` makes one (its decay groups, ``get_optimizer_cls_and_kwargs``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from ._hf_workloads import Training, enable_checkpointing, require_transformers, training_step
from ._memscope import UsageError

Workload = Callable[[int], Callable[[], Any]]


def is_trainer(obj: Any) -> bool:
    """A transformers.Trainer (or subclass), by its classes' names: asking transformers would
    import its trainer module (seconds) for every workload."""
    return any(c.__name__ == "Trainer" and c.__module__.startswith("transformers")
               for c in type(obj).__mro__)


def training_of(args: Any) -> Training:
    """What TrainingArguments say about the step's memory."""
    return Training(
        bf16=bool(getattr(args, "bf16", False)), fp16=bool(getattr(args, "fp16", False)),
        gradient_checkpointing=bool(getattr(args, "gradient_checkpointing", False)),
        optimizer=str(getattr(args, "optim", "adamw_torch")),
        learning_rate=float(getattr(args, "learning_rate", 5e-5)),
        weight_decay=float(getattr(args, "weight_decay", 0.0)),
        gradient_accumulation_steps=int(getattr(args, "gradient_accumulation_steps", 1)),
        max_grad_norm=float(getattr(args, "max_grad_norm", 0.0) or 0.0))


def _one_batch(trainer: Any) -> dict[str, Any]:
    """The first batch the trainer's data loader gives (real host tensors), with an attention
    mask of all ones dropped: transformers reads it on the GPU and then attends without one
    (is_causal, flash attention), which it cannot do on the capture's fake tensors."""
    import torch

    if trainer.train_dataset is None:
        raise UsageError("memscope.estimate(trainer): the Trainer has no train_dataset to take "
                         "a batch from")
    batch = next(iter(trainer.get_train_dataloader()))
    if not isinstance(batch, dict):
        batch = dict(batch)
    mask = batch.get("attention_mask")
    if isinstance(mask, torch.Tensor) and bool(mask.bool().all()):
        batch = {k: v for k, v in batch.items() if k != "attention_mask"}
    return batch


def _resized(batch: dict[str, Any], rows: int, size: int) -> dict[str, Any]:
    """The batch with `size` rows (the first `rows` rows repeated), same sequence length."""
    import torch

    index = torch.arange(size) % rows
    return {k: (v[index] if isinstance(v, torch.Tensor) and v.dim() and v.size(0) == rows
                else v) for k, v in batch.items()}


def _optimizer(trainer: Any, model: Any) -> Any:
    """The optimizer Trainer.create_optimizer would make for `model` (or one like the
    trainer's own, when it was given one)."""
    args = trainer.args
    decay = set(trainer.get_decay_parameter_names(model))
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    groups = [{"params": [p for n, p in named if n in decay], "weight_decay": args.weight_decay},
              {"params": [p for n, p in named if n not in decay], "weight_decay": 0.0}]
    groups = [g for g in groups if g["params"]]
    if trainer.optimizer is not None:
        return type(trainer.optimizer)(groups, **trainer.optimizer.defaults)
    cls, kwargs = trainer.get_optimizer_cls_and_kwargs(args, model)
    kwargs = dict(kwargs)
    if "params" in kwargs:
        raise UsageError(f"memscope.estimate(trainer): optimizer {args.optim!r} builds its own "
                         "parameter groups; the estimate knows the torch optimizers")
    return cls(groups, **kwargs)


def trainer_workload(trainer: Any) -> tuple[Workload, int]:
    """(workload(batch), the trainer's per-device batch size)."""
    require_transformers()
    args = trainer.args
    how = training_of(args)
    first = _one_batch(trainer)
    rows = next((int(v.size(0)) for v in first.values() if hasattr(v, "dim") and v.dim()), 0)
    if rows == 0:
        raise UsageError("memscope.estimate(trainer): the data collator's batch holds no tensor")
    ckpt_kwargs = getattr(args, "gradient_checkpointing_kwargs", None)

    def workload(batch: int) -> Callable[[], None]:
        model = copy.deepcopy(trainer.model)  # fake tensors: inside the capture's fake mode
        if how.gradient_checkpointing:
            enable_checkpointing(model, ckpt_kwargs)
        model.train()
        model = model.cuda()
        opt = _optimizer(trainer, model)
        inputs = _resized(first, rows, batch)

        def next_batch() -> dict[str, Any]:  # Trainer._prepare_inputs: to the GPU
            return {k: (v.to("cuda") if hasattr(v, "to") else v) for k, v in inputs.items()}

        return training_step(model, opt, next_batch, how)

    return workload, int(args.per_device_train_batch_size)
