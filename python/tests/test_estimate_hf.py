"""memscope.estimate on Hugging Face transformers models built from tiny configs (random
weights, nothing downloaded), the Trainer path and `memscope estimate --hf`. transformers is
optional: these skip without it. Costs (2 cores): the gallery about 1.5 s per model and
setting (18 runs, ~30 s), the Trainer tests ~3 s each, the command line ~8 s."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import memscope

torch = pytest.importorskip("torch")
# The command line, as `memscope estimate` execs it.
COMMAND = [sys.executable, "-m", "memscope._estimate_command"]
transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

from memscope import _hf_workloads  # noqa: E402  (after the skips: it needs transformers)

SEQ = 64
# What CUDA's dispatch picks on an H200 with this PyTorch (cuDNN first for bf16 where it
# can run; fp32 has only the memory-efficient kernel): the gallery's expected backends.
FP32_BACKEND = "efficient"


@pytest.mark.parametrize("name", list(_hf_workloads.GALLERY))
@pytest.mark.parametrize("bf16,checkpointing", [(False, False), (True, True)])
def test_gallery_model_is_captured_and_adds_up(name: str, bf16: bool,
                                               checkpointing: bool) -> None:
    model_type, tiny = _hf_workloads.GALLERY[name]
    how = _hf_workloads.Training(bf16=bf16, gradient_checkpointing=checkpointing)
    work = _hf_workloads.hf_workload(model_type, seq=SEQ, how=how, **tiny)
    e = memscope.estimate(work, batch=2, steps=2, device="h200", capacity="1GiB")
    assert e.fits and sum(e.by_category.values()) == e.peak_allocated
    params = e.by_category["parameters"]
    assert params > 0
    # AdamW: two fp32 moments per trainable parameter live through the step (the
    # "parameters" category also holds buffers, such as BERT's position ids).
    assert 1.9 * params <= e.by_category["optimizer state"] <= 2 * params
    assert sum(e.attention.values()) > 0  # every gallery model runs SDPA
    if not bf16:
        assert set(e.attention) == {FP32_BACKEND}
    else:
        assert "math" not in e.attention


def test_gradient_checkpointing_lowers_the_activations_at_the_peak() -> None:
    model_type, tiny = _hf_workloads.GALLERY["Llama (GQA, RoPE)"]
    tiny = {**tiny, "num_hidden_layers": 4}

    def peak(checkpointing: bool) -> Any:
        how = _hf_workloads.Training(gradient_checkpointing=checkpointing)
        work = _hf_workloads.hf_workload(model_type, seq=128, how=how, **tiny)
        return memscope.estimate(work, batch=4, steps=2, capacity="4GiB", workspace_bytes=0)

    plain, ckpt = peak(False), peak(True)
    assert ckpt.by_category["activations"] < plain.by_category["activations"] / 2
    assert ckpt.by_category["parameters"] == plain.by_category["parameters"]


def test_config_by_class_name_and_by_local_file(tmp_path: Path) -> None:
    a = _hf_workloads.load_config("GPT2Config", n_layer=1)
    assert a.model_type == "gpt2" and a.n_layer == 1
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 1,
                                "hidden_size": 32, "num_attention_heads": 2}))
    b = _hf_workloads.load_config(str(path))
    assert b.model_type == "llama" and b.num_hidden_layers == 1
    assert _hf_workloads.load_config(str(tmp_path)).hidden_size == 32  # the directory
    with pytest.raises(memscope.UsageError, match="not a transformers model type"):
        _hf_workloads.load_config("no-such-model")
    with pytest.raises(memscope.UsageError, match="no such config file"):
        _hf_workloads.load_config(str(tmp_path / "missing.json"))


def _tiny_trainer(tmp_path: Path, **args: Any) -> Any:
    model_type, tiny = _hf_workloads.GALLERY["GPT-2"]
    config = _hf_workloads.load_config(model_type, **tiny)
    model = transformers.AutoModelForCausalLM.from_config(config)
    rows = [{"input_ids": list(range(1, SEQ + 1)), "labels": list(range(1, SEQ + 1))}
            for _ in range(8)]
    targs = transformers.TrainingArguments(output_dir=str(tmp_path), report_to=[],
                                           use_cpu=True, **args)
    return transformers.Trainer(model=model, args=targs, train_dataset=rows,
                                data_collator=transformers.default_data_collator)


def test_trainer_is_estimated_with_its_batch_and_left_unchanged(tmp_path: Path) -> None:
    trainer = _tiny_trainer(tmp_path, per_device_train_batch_size=4)
    weight = trainer.model.transformer.wte.weight
    before = weight.detach().clone()
    e = memscope.estimate(trainer, capacity="1GiB", device="h200")
    assert e.batch == 4  # the per-device batch size
    n_params = sum(p.numel() for p in trainer.model.parameters())
    assert e.by_category["parameters"] == pytest.approx(n_params * 4, rel=0.01)
    assert e.by_category["optimizer state"] >= 2 * n_params * 4 - 4096
    assert trainer.model.transformer.wte.weight is weight  # the trainer's model untouched
    assert torch.equal(weight.detach(), before) and trainer.optimizer is None


def test_trainer_arguments_change_the_estimate(tmp_path: Path) -> None:
    plain = memscope.estimate(_tiny_trainer(tmp_path, per_device_train_batch_size=4),
                              capacity="1GiB")
    sgd = memscope.estimate(_tiny_trainer(tmp_path, per_device_train_batch_size=4, optim="sgd"),
                            capacity="1GiB")
    assert sgd.by_category["optimizer state"] == 0 < plain.by_category["optimizer state"]
    bf16 = memscope.estimate(_tiny_trainer(tmp_path, per_device_train_batch_size=4, bf16=True),
                             capacity="1GiB", device="h200")
    assert set(bf16.attention) - {"efficient"}  # bf16 reaches a half-precision kernel
    accum = memscope.estimate(_tiny_trainer(tmp_path, per_device_train_batch_size=4,
                                            gradient_accumulation_steps=2), capacity="1GiB")
    assert sum(accum.attention.values()) == 2 * sum(plain.attention.values())


def test_max_batch_of_a_trainer(tmp_path: Path) -> None:
    s = memscope.max_batch(_tiny_trainer(tmp_path, per_device_train_batch_size=2),
                           capacity="160MiB", steps=2)
    assert s.batch >= 1
    assert all(ok == (b <= s.batch) for b, ok in s.tried.items())


def test_command_line_hf(tmp_path: Path) -> None:
    out = tmp_path / "e.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    config = tmp_path / "config.json"
    _, tiny = _hf_workloads.GALLERY["GPT-2"]
    config.write_text(json.dumps({"model_type": "gpt2", **tiny}))
    r = subprocess.run([*COMMAND, "--hf", str(config),
                        "--seq", "64", "--batch", "2", "--bf16", "--capacity", "1GiB",
                        "--device", "h200", "--json", str(out)],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    figures = json.loads(out.read_text())["estimate"]
    assert figures["batch"] == 2 and figures["attention"]
    bad = subprocess.run([*COMMAND, "--hf", "no-such-model"],
                         capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "not a transformers model type" in bad.stderr  # usage


def test_flash_attention_2_is_captured_without_flash_attn_or_a_gpu() -> None:
    # About 3 s. flash-attn is not installed here: the model builds inside the capture only.
    model_type, tiny = _hf_workloads.GALLERY["Llama (GQA, RoPE)"]
    how = _hf_workloads.Training(bf16=True)
    work = _hf_workloads.hf_workload(model_type, seq=SEQ, how=how,
                                     attn_implementation="flash_attention_2", **tiny)
    e = memscope.estimate(work, batch=2, steps=2, device="h200", capacity="1GiB")
    assert e.attention == {"flash (flash_attention_2)": 2 * tiny["num_hidden_layers"]}
    fp32 = _hf_workloads.hf_workload(model_type, seq=SEQ, attn_implementation="flash_attention_2",
                                     **tiny)
    with pytest.raises(memscope.CaptureError, match="fp16 or bf16"):
        memscope.estimate(fp32, batch=2, steps=1, capacity="1GiB")
