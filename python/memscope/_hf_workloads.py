"""Hugging Face transformers models as memscope.estimate workloads, built from their configs with
random weights (nothing is downloaded): ``hf_workload(config, seq=512)`` is a workload(batch)
that builds the model on "cuda" and returns one training step (forward with labels, backward,
optimizer step, zero_grad), as users write it or as the Trainer runs it.

transformers is imported on first use; without it, ImportError says how to install it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional, Union

from ._memscope import UsageError

Workload = Callable[[int], Callable[[], Any]]


def require_transformers() -> Any:
    try:
        import transformers
    except ImportError as e:
        raise ImportError("memscope: Hugging Face models need transformers: "
                          "pip install transformers (or memscope[hf])") from e
    return transformers


def load_config(spec: Union[str, Any], **overrides: Any) -> Any:
    """A transformers config from: a config object, a local config.json (or a directory holding
    one), a config class name ("GPT2Config"), or a model type ("gpt2", "llama"); never a
    download. `overrides` set attributes (e.g. n_layer=2)."""
    tf = require_transformers()
    if isinstance(spec, tf.PretrainedConfig):
        config = spec
    elif not isinstance(spec, str) or not spec:
        raise UsageError(f"memscope: expected a transformers config, a config file or a model "
                         f"type, got {spec!r}")
    elif os.path.isdir(spec) or spec.endswith(".json") or os.path.sep in spec:
        path = os.path.join(spec, "config.json") if os.path.isdir(spec) else spec
        if not os.path.isfile(path):
            raise UsageError(f"memscope: no such config file: {path}")
        with open(path) as f:
            data = json.load(f)
        model_type = data.get("model_type")
        if not model_type:
            raise UsageError(f"memscope: {path} has no \"model_type\" (a transformers "
                             "config.json names it)")
        config = tf.AutoConfig.for_model(**data)
    elif spec.endswith("Config") and hasattr(tf, spec):
        config = getattr(tf, spec)()
    else:
        try:
            config = tf.AutoConfig.for_model(spec)
        except ValueError as e:
            raise UsageError(
                f"memscope: {spec!r} is not a transformers model type or config class "
                "(e.g. gpt2, llama, bert, GPT2Config) nor a local config.json") from e
    for k, v in overrides.items():
        setattr(config, k, v)
    return config


# Which AutoModel class trains the model, by what its config says it is.
def _task(config: Any) -> str:
    if getattr(config, "is_encoder_decoder", False):
        return "seq2seq"
    mt = getattr(config, "model_type", "")
    if mt in ("vit", "deit", "beit", "swin", "convnext", "resnet", "dinov2"):
        return "image"
    if mt in ("bert", "roberta", "distilbert", "albert", "electra", "deberta", "deberta-v2",
              "xlm-roberta", "modernbert"):
        return "masked"
    return "causal"


def build_model(config: Any, attn_implementation: Optional[str] = None) -> Any:
    """The model for `config` with random weights (on the host; the workload moves it)."""
    tf = require_transformers()
    auto = {"causal": tf.AutoModelForCausalLM, "masked": tf.AutoModelForMaskedLM,
            "seq2seq": tf.AutoModelForSeq2SeqLM,
            "image": tf.AutoModelForImageClassification}[_task(config)]
    kwargs = {"attn_implementation": attn_implementation} if attn_implementation else {}
    return auto.from_config(config, **kwargs)


def example_batch(config: Any, batch: int, seq: int, device: str = "cuda") -> dict[str, Any]:
    """One training batch of the shape the model's task takes, with labels."""
    import torch

    task = _task(config)
    if task == "image":
        size = int(getattr(config, "image_size", 224))
        channels = int(getattr(config, "num_channels", 3))
        labels = max(2, int(getattr(config, "num_labels", 2)))
        return {"pixel_values": torch.randn(batch, channels, size, size, device=device),
                "labels": torch.randint(0, labels, (batch,), device=device)}
    # No attention_mask: an all-ones one is what transformers drops on the GPU (it reads the
    # values there; on fake tensors it cannot, and would keep a mask the GPU run does not have).
    vocab = int(config.vocab_size)
    return {"input_ids": torch.randint(0, vocab, (batch, seq), device=device),
            "labels": torch.randint(0, vocab, (batch, seq), device=device)}


@dataclass
class Training:
    """How the step trains: what TrainingArguments say, or what a user's loop does."""

    bf16: bool = False
    fp16: bool = False
    gradient_checkpointing: bool = False
    optimizer: str = "adamw_torch"  # a Trainer optim name: adamw_torch(_fused), sgd, adafactor...
    learning_rate: float = 5e-5
    weight_decay: float = 0.0
    gradient_accumulation_steps: int = 1
    max_grad_norm: float = 0.0  # clip_grad_norm_ before the step when > 0

    def autocast_dtype(self) -> Any:
        import torch

        if self.bf16:
            return torch.bfloat16
        if self.fp16:
            return torch.float16
        return None


def make_optimizer(name: str, params: Any, lr: float, weight_decay: float) -> Any:
    """The torch optimizer a Trainer `optim` name stands for."""
    import torch

    n = name.lower()
    if n in ("adamw_torch", "adamw", "adamw_hf", "adamw_torch_fused"):
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay,
                                 fused=True if n.endswith("fused") else None)
    if n in ("adamw_torch_foreach",):
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, foreach=True)
    if n == "adam":
        return torch.optim.Adam(params, lr=lr)
    if n == "sgd":
        return torch.optim.SGD(params, lr=lr)
    if n == "adagrad":
        return torch.optim.Adagrad(params, lr=lr)
    if n == "rmsprop":
        return torch.optim.RMSprop(params, lr=lr)
    if n == "adafactor":
        tf = require_transformers()
        return tf.optimization.Adafactor(params, lr=lr, scale_parameter=False,
                                         relative_step=False)
    raise UsageError(f"memscope: optimizer {name!r} is not one the estimate knows (adamw_torch, "
                     "adamw_torch_fused, adam, sgd, adagrad, rmsprop, adafactor)")


def training_step(model: Any, optimizer: Any, next_batch: Callable[[], dict[str, Any]],
                  how: Training) -> Callable[[], None]:
    """One optimizer step as the Trainer runs it: for each of the accumulation steps, a
    micro-batch moved to the GPU, forward under autocast (bf16/fp16) and backward of loss /
    accumulation steps; gradient clipping; the step; zero_grad(set_to_none=True)."""
    import torch

    dtype = how.autocast_dtype()
    accum = max(1, how.gradient_accumulation_steps)

    def step() -> None:
        for _ in range(accum):
            inputs = next_batch()
            with torch.autocast("cuda", dtype=dtype, enabled=dtype is not None):
                loss = model(**inputs).loss
            (loss / accum).backward()
            del inputs, loss
        if how.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), how.max_grad_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def enable_checkpointing(model: Any, kwargs: Optional[dict[str, Any]] = None) -> None:
    """Gradient (activation) checkpointing on, by the name this transformers has."""
    enable = getattr(model, "activation_checkpointing_enable", None)
    if enable is not None:
        enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def hf_workload(config: Union[str, Any], seq: int = 512, how: Optional[Training] = None,
                attn_implementation: Optional[str] = "sdpa", **overrides: Any) -> Workload:
    """workload(batch) for memscope.estimate / max_batch: the model of `config` (see
    load_config) built on "cuda" with random weights, trained on random token ids of length
    `seq` (or images of the config's size) with `how` (default: fp32, AdamW)."""
    how = how or Training()
    cfg = load_config(config, **overrides)
    if _task(cfg) == "seq2seq" and getattr(cfg, "decoder_start_token_id", None) is None:
        # Labels are shifted right from this token (T5's published configs set 0, the pad).
        cfg.decoder_start_token_id = getattr(cfg, "pad_token_id", None) or 0

    def workload(batch: int) -> Callable[[], None]:
        model = build_model(cfg, attn_implementation)
        if how.gradient_checkpointing:
            enable_checkpointing(model)
        model.train()
        model = model.cuda()
        params = [p for p in model.parameters() if p.requires_grad]
        opt = make_optimizer(how.optimizer, params, how.learning_rate, how.weight_decay)
        return training_step(model, opt, lambda: example_batch(cfg, batch, seq), how)

    return workload


# The architectures memscope's estimate is checked on (docs/estimate.md's gallery): model type
# and a tiny config for the tests (seconds each on two cores); the full-size table uses the
# configs' defaults (bench/estimate_gallery.py).
_TINY_DECODER = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
                 "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512,
                 "max_position_embeddings": 256}
GALLERY: dict[str, tuple[str, dict[str, Any]]] = {
    "GPT-2": ("gpt2", {"n_layer": 2, "n_embd": 64, "n_head": 4, "n_positions": 256,
                       "vocab_size": 512}),
    "Llama (GQA, RoPE)": ("llama", dict(_TINY_DECODER)),
    "Mistral": ("mistral", dict(_TINY_DECODER)),
    "Qwen2": ("qwen2", dict(_TINY_DECODER)),
    "Gemma": ("gemma", {**_TINY_DECODER, "num_key_value_heads": 1, "head_dim": 16}),
    "BERT": ("bert", {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
                      "num_attention_heads": 4, "vocab_size": 512,
                      "max_position_embeddings": 256}),
    "T5 (encoder-decoder)": ("t5", {"num_layers": 2, "num_decoder_layers": 2, "d_model": 64,
                                    "d_ff": 128, "num_heads": 4, "d_kv": 16,
                                    "vocab_size": 512}),
    "ViT": ("vit", {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
                    "num_attention_heads": 4, "image_size": 32, "patch_size": 8}),
    "Mixtral (MoE)": ("mixtral", {**_TINY_DECODER, "num_local_experts": 4,
                                  "num_experts_per_tok": 2}),
}
