"""The capture behind memscope.estimate: run a training step written for "cuda" on a machine
without a GPU, and record what the CUDA caching allocator would be asked for.

How (docs/estimate.md has the user's view):

- Tensors are PyTorch fake tensors (``FakeTensorMode``): shapes, dtypes and storages, no data, no
  memory. They live on the fake *CPU* device, not a fake "cuda" one: PyTorch's autograd engine
  asks the CUDA runtime about device 0 when it runs a backward pass over "cuda" tensors, which
  fails where there is no GPU. A ``TorchFunctionMode`` rewrites every ``device="cuda"``,
  ``.cuda()`` and ``.to("cuda")`` to the CPU and marks the storages they create as *device*
  storages; an op's new storages are device storages when any of its tensor inputs is one. Only
  device storages are recorded: the data a step prepares on the host is not GPU memory.
- A ``TorchDispatchMode`` sees every op after autograd: each new device storage is an ``alloc``
  of its ``nbytes`` (what the caching allocator is asked for; its rounding and splitting are the
  replay's job), and a weak reference to the storage (PyTorch keeps one Python object per
  storage) reports its ``free_completed`` the moment the last tensor using it goes.
- What CUDA kernels allocate and CPU kernels do not is added where it is known: cuBLAS's
  workspace (one per thread that runs matrix multiplies: the step's and autograd's), and the
  buffers of the fused attention backward passes. ``NOT_MODELED`` lists what is not.
- ``F.scaled_dot_product_attention`` runs the backend CUDA's dispatch would pick on the GPU
  estimated for (memscope._attention), not the CPU's choice.
- Categories come from what tensors are: module parameters (seen by global forward hooks),
  their ``.grad``, optimizer state (global optimizer step hooks), tensors autograd saves for
  backward (saved-tensor hooks); everything else is a temporary.
- While it runs, the workload's own code finds the GPU ``device=`` names (memscope._gpus):
  ``torch.cuda.is_available()`` True, one device, its capability, bf16 support and memory;
  PyTorch's code still sees none. ``synchronize``, ``empty_cache`` and the peak resets do
  nothing; ``set_default_device("cuda")`` and ``GradScaler("cuda")`` work as on the GPU.
- One capture runs at a time (_CAPTURE_LOCK), and every replacement in torch acts for the
  capturing thread alone: other threads, during and after, see PyTorch's own functions.
- ``torch.autocast("cuda", ...)`` becomes CPU autocast with the same dtype, and the ops CUDA
  autocast runs in fp32 get fp32 inputs at their Python call (see NOT_MODELED).
"""

from __future__ import annotations

import inspect
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, Optional

from . import _attention, _cudnn_conv, _hf_patches
from ._capture_scope import CAPTURE_LOCK, in_capture, replaced
from ._frames import StackTable
from ._memscope import Error, UsageError

CATEGORIES = ("host", "parameters", "gradients", "optimizer state", "activations",
              "temporaries", "workspaces")  # "host": recorded, then found to live on the host

NOT_MODELED = (
    "cuDNN convolution workspaces are requested when PyTorch requests them (one per call, "
    "freed at its end), but their size is a stand-in (the call's larger activation): cuDNN's "
    "heuristics choose the engine on the GPU; torch.backends.cudnn.benchmark's probe is not "
    "modelled",
    "attention backward workspaces are modelled from the kernels' sources, not measured: "
    "the memory-efficient kernel's key splits and cuDNN's graph workspace are approximations",
    "autocast(\"cuda\") runs as CPU autocast with the same dtype, and CUDA autocast's fp32 "
    "ops are cast at their Python call (torch.exp, F.softmax, F.cross_entropy, ...); an op "
    "called from C++ inside another (a composite) follows CPU autocast's lists",
    "NCCL buffers; the CUDA context and cuBLAS/cuDNN handles (outside the caching allocator) "
    "count only when the capacity names a card (capacity=\"h100-80gb\"); a capacity in bytes "
    "is what the allocator may use",
    "torch.compile, CUDA graphs, custom CUDA extensions, other streams",
)

# CUDA autocast's fp32 lists (aten/src/ATen/autocast_mode.cpp): ops run in fp32 on lower
# precision inputs, and ops given dtype=float32 (fp32_set_opt_dtype). CPU autocast keeps these
# in the lower precision, so the capture casts at the Python call (see _autocast_fp32).
_AUTOCAST_FP32 = frozenset(
    ("exp", "log", "log2", "log10", "log1p", "expm1", "rsqrt", "reciprocal", "pow", "__pow__",
     "__rpow__", "square", "sinh", "cosh", "tan", "acos", "asin", "erfinv", "softplus",
     "layer_norm", "group_norm", "norm", "cosine_similarity", "nll_loss", "kl_div", "l1_loss",
     "smooth_l1_loss", "huber_loss", "mse_loss", "binary_cross_entropy_with_logits",
     "cross_entropy", "logsumexp", "dist", "cdist", "renorm", "poisson_nll_loss",
     "cosine_embedding_loss", "hinge_embedding_loss", "margin_ranking_loss",
     "soft_margin_loss", "multi_margin_loss", "multilabel_margin_loss",
     "triplet_margin_loss"))
_AUTOCAST_FP32_DTYPE = frozenset(
    ("softmax", "log_softmax", "sum", "prod", "cumsum", "cumprod"))

_MATMULS = frozenset(
    ("mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "_addmm_activation", "matmul",
     "dot", "vdot", "addr", "_int_mm", "_scaled_mm"))
class CaptureError(Error, RuntimeError):
    """The step cannot be captured without a GPU: an op with no fake kernel, an output whose
    shape or value depends on data (``.item()``, ``nonzero``), or code that needs a real CUDA
    device. ``op`` names the op when one is to blame."""

    def __init__(self, message: str, op: Optional[str] = None) -> None:
        super().__init__(message)
        self.op = op


@dataclass
class Allocation:
    """One device storage of the capture."""

    addr: int
    size: int
    category: str = "temporaries"
    module: str = ""  # the innermost module running forward when it was allocated
    phase: str = ""
    op: str = ""  # the op whose output it is (or what the capture added: "cuBLAS workspace")


@dataclass
class Capture:
    """What one capture recorded: events as Trace.from_events takes them, and per allocation
    what it is. Events are allocs and frees only, so op i of a replay is event i."""

    events: list[tuple[str, int, int, int, int]] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    stacks: list[list[tuple[str, int, str]]] = field(default_factory=list)
    allocations: dict[int, Allocation] = field(default_factory=dict)
    step_starts: list[int] = field(default_factory=list)  # event index where each step began
    step_ends: list[int] = field(default_factory=list)  # and where it ended
    ops: int = 0
    workspace_bytes: int = 0
    setup_reads: int = 0  # tensor values read while the model was built (zero stood in)
    attention: dict[str, int] = field(default_factory=dict)  # SDPA calls by CUDA backend
    # The threads ("step", "backward") that used cuBLAS and cuDNN: each holds its own handle.
    cublas_threads: set[str] = field(default_factory=set)
    cudnn_threads: set[str] = field(default_factory=set)


def _rewrite_device(value: Any) -> tuple[Any, bool]:
    """(value with a CUDA device replaced by "cpu", whether it was one)."""
    import torch

    if isinstance(value, torch.device):
        return (torch.device("cpu"), True) if value.type == "cuda" else (value, False)
    if isinstance(value, str) and (value == "cuda" or value.startswith("cuda:")):
        return "cpu", True
    if isinstance(value, int) and not isinstance(value, bool):
        return value, False
    return value, False


class _Recorder:
    """The state of one capture, shared by the modes and hooks."""

    def __init__(self, workspace_bytes: int, gpu: Optional[_attention.Gpu] = None) -> None:
        self.capture = Capture(workspace_bytes=workspace_bytes)
        self.gpu = gpu  # the GPU estimated for: how CUDA would dispatch attention
        self.live: dict[int, int] = {}  # storage key -> addr
        self.refs: dict[int, Any] = {}  # addr -> weakref to the storage
        self.next_addr = 0x7F0000000000
        self.device_depth = 0  # > 0 inside a call rewritten from "cuda"
        self.autocast = 0  # > 0 inside autocast("cuda") (run as CPU autocast)
        self.module_stack: list[str] = []
        self.module_names: dict[int, str] = {}
        self.in_optimizer = 0
        self.step = 0  # 0: building the model; 1..: the step being run
        self.steps = 0
        self.workspace_threads: set[str] = set()
        self.tag_ids: dict[str, int] = {}
        self.stack_table = StackTable(self.capture.stacks, limit=6)
        self.lock = threading.Lock()
        self.default_cuda = False  # torch.set_default_device("cuda") inside the capture
        self.in_scaler_step = 0  # > 0 inside GradScaler's step (its found-inf read)
        self.threads: set[threading.Thread] = set()  # started by the capturing thread
        self.foreign_forward = ""  # a module run by one of them: the thread's name

    def count_attention(self, backend: str) -> None:
        self.capture.attention[backend] = self.capture.attention.get(backend, 0) + 1

    def in_autocast(self) -> bool:
        """Inside autocast("cuda") (run as CPU autocast), or inside the CPU autocast that
        activation checkpointing re-enters for its recomputation (the tensors' device is the
        CPU, so it saved CPU autocast's state)."""
        import torch

        return self.autocast > 0 or torch.is_autocast_enabled("cpu")

    # ---- events ---------------------------------------------------------------------------

    def phase(self) -> str:
        import torch

        if torch._C._current_graph_task_id() != -1:
            return "backward"
        if self.in_optimizer:
            return "optimizer"
        if self.module_stack:
            return "forward"
        return "step" if self.step else "setup"

    def tag(self, phase: str) -> int:
        if self.step > self.steps:
            text = "after the steps"
        else:
            text = f"step {self.step}: {phase}" if self.step else phase
        tid = self.tag_ids.get(text)
        if tid is None:
            self.capture.tags.append(text)
            tid = self.tag_ids[text] = len(self.capture.tags)
        return tid

    def stack(self) -> int:
        return self.stack_table.here(3)

    def alloc(self, size: int, phase: str, category: str = "temporaries", op: str = "") -> int:
        addr = self.next_addr
        self.next_addr += (size + 1023) // 512 * 512 + 512  # distinct, never reused
        module = self.module_stack[-1] if self.module_stack else ""
        self.capture.allocations[addr] = Allocation(addr, size, category, module, phase, op)
        self.capture.events.append(("alloc", addr, size, self.stack(), self.tag(phase)))
        return addr

    def free(self, addr: int) -> None:
        a = self.capture.allocations[addr]
        self.capture.events.append(("free_completed", addr, a.size, 0, self.tag(self.phase())))

    def track(self, storage: Any, phase: str, op: str) -> None:
        key = storage._cdata
        if key in self.live:
            return
        size = int(storage.nbytes())
        if size == 0:  # the caching allocator hands out no memory for zero bytes
            return
        addr = self.alloc(size, phase, op=op)
        self.live[key] = addr

        def gone(_: Any, key: int = key, addr: int = addr) -> None:
            with self.lock:
                if self.live.get(key) == addr:
                    del self.live[key]
                    self.free(addr)
                self.refs.pop(addr, None)

        self.refs[addr] = weakref.ref(storage, gone)

    def is_device(self, t: Any) -> bool:
        try:
            return t.untyped_storage()._cdata in self.live
        except (RuntimeError, NotImplementedError):
            return False

    def mark(self, t: Any, category: str) -> None:
        """Gives the storage of `t` a category, keeping the stronger one (CATEGORIES order)."""
        import torch

        if not isinstance(t, torch.Tensor):
            return
        addr = self.live.get(t.untyped_storage()._cdata)
        if addr is None:
            return
        a = self.capture.allocations[addr]
        if CATEGORIES.index(category) < CATEGORIES.index(a.category):
            a.category = category

    def workspace(self, phase: str) -> None:
        thread = "backward" if phase == "backward" else "step"
        self.capture.cublas_threads.add(thread)
        if self.capture.workspace_bytes and thread not in self.workspace_threads:
            self.workspace_threads.add(thread)
            self.alloc(self.capture.workspace_bytes, phase, "workspaces", "cuBLAS workspace")


def _device_rewrite_mode(rec: _Recorder) -> Any:
    """A TorchFunctionMode that keeps "cuda" tensors on the fake host device, counting the
    calls that move data to the GPU (rec.device_depth) so their results count as device memory."""
    import torch
    from torch.overrides import TorchFunctionMode

    class DeviceRewrite(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            kwargs = dict(kwargs or {})
            name = getattr(func, "__name__", "")
            moved = False
            if name == "backward" and func in (torch.Tensor.backward, torch.autograd.backward):
                # The mode is off inside its own handler, and a backward runs user code again
                # (activation checkpointing's recomputation), which must see it: the engine
                # runs with the mode back on.
                with self:
                    return _run_backward(func, args, kwargs)
            if name in ("cuda", "to") and args and isinstance(args[0], torch.Tensor):
                t = args[0]
                if name == "cuda":
                    dtype, fmt, moved = None, kwargs.get("memory_format"), True
                else:
                    # _parse_to takes no copy= (GradScaler's unscale passes one).
                    target, dtype, _, fmt = torch._C._nn._parse_to(
                        *args[1:], **{k: v for k, v in kwargs.items() if k != "copy"})
                    moved = target is not None and target.type == "cuda"
                if moved:  # to the GPU: a copy there (a new allocation), unless it is there
                    how: dict[str, Any] = {}
                    if dtype is not None:
                        how["dtype"] = dtype
                    if fmt is not None:
                        how["memory_format"] = fmt
                    if rec.is_device(t):
                        return t.to(**how) if how else t
                    rec.device_depth += 1
                    try:
                        return t.to(copy=True, **how) if how else t.clone()
                    finally:
                        rec.device_depth -= 1
            if name == "scaled_dot_product_attention" and rec.gpu is not None:
                return _attention_as_cuda(rec, args, kwargs)
            if "device" in kwargs:
                kwargs["device"], moved = _rewrite_device(kwargs["device"])
            if kwargs.get("device") is None and _cuda_by_default(rec) and (
                    func in _device_constructors()):
                kwargs["device"], moved = "cpu", True  # set_default_device("cuda")
            if (name in _AUTOCAST_FP32 or name in _AUTOCAST_FP32_DTYPE) and rec.in_autocast():
                args, kwargs = _autocast_fp32(name, args, kwargs)
            if not moved:
                return func(*args, **kwargs)
            rec.device_depth += 1
            try:
                return func(*args, **kwargs)
            finally:
                rec.device_depth -= 1

    return DeviceRewrite()


def _device_constructors() -> Any:
    from torch.utils._device import _device_constructors as constructors

    return constructors()


def _cuda_by_default(rec: _Recorder) -> bool:
    """Whether a factory call without a device makes a CUDA tensor: set_default_device("cuda")
    in the capture, or inside ``with torch.device("cuda"):`` (PyTorch's DeviceContext)."""
    from torch.utils import _device

    current = _device.CURRENT_DEVICE
    return rec.default_cuda or (current is not None and current.type == "cuda")


def _run_backward(func: Any, args: Any, kwargs: dict[str, Any]) -> None:
    """Tensor.backward / torch.autograd.backward without their __torch_function__ check (which
    would call the mode again): the gradients made as torch.autograd.backward makes them, then
    the autograd engine."""
    import torch
    from torch.autograd import _make_grads, _tensor_or_tensors_to_tuple
    from torch.autograd.graph import _engine_run_backward

    if func is torch.Tensor.backward:
        names: tuple[str, ...] = ("tensors", "grad_tensors", "retain_graph", "create_graph",
                                  "inputs")
        bound = dict(zip(names, args, strict=False))
        if "gradient" in kwargs:
            bound["grad_tensors"] = kwargs.pop("gradient")
        bound.update(kwargs)
    else:
        names = ("tensors", "grad_tensors", "retain_graph", "create_graph", "grad_variables",
                 "inputs")
        bound = {**dict(zip(names, args, strict=False)), **kwargs}
    tensors = bound["tensors"]
    tensors = (tensors,) if isinstance(tensors, torch.Tensor) else tuple(tensors)
    inputs = bound.get("inputs")
    inputs = (() if inputs is None else
              (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs))
    grads = _make_grads(tensors, _tensor_or_tensors_to_tuple(bound.get("grad_tensors"),
                                                             len(tensors)),
                        is_grads_batched=False)
    create_graph = bool(bound.get("create_graph", False))
    retain_graph = bound.get("retain_graph")
    _engine_run_backward(tensors, grads, create_graph if retain_graph is None else retain_graph,
                         create_graph, inputs, allow_unreachable=True, accumulate_grad=True)


def _tensors_in(value: Any, tensor: type) -> list[Any]:
    """The tensors in an op's arguments or outputs (tensors, and lists, tuples and dicts of
    them): what torch's tree_flatten finds there, at a tenth of its cost per op."""
    if isinstance(value, tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        found: list[Any] = []
        for v in value:
            if isinstance(v, tensor):
                found.append(v)
            elif isinstance(v, (list, tuple, dict)):
                found += _tensors_in(v, tensor)
        return found
    if isinstance(value, dict):
        return _tensors_in(list(value.values()), tensor)
    return []


def _record_mode(rec: _Recorder) -> Any:
    """A TorchDispatchMode that records every storage an op creates on the device into `rec`."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Record(TorchDispatchMode):  # type: ignore[no-untyped-call]
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            rec.capture.ops += 1
            inputs = _tensors_in(args, torch.Tensor) + _tensors_in(kwargs, torch.Tensor)
            # While the model is built, only what goes to "cuda" is device memory; during the
            # steps every storage is (the host tensors of a training step are few and small).
            name = func.overloadpacket.__name__
            # torch.tensor(data) without a device is host data (lift_fresh turns it into a fake
            # tensor); with device="cuda" it is under a rewritten call.
            host_data = name.startswith("lift_fresh") and rec.device_depth == 0
            on_device = not host_data and (rec.step > 0 or rec.device_depth > 0
                                           or any(rec.is_device(t) for t in inputs))
            phase = rec.phase() if on_device else ""
            extra: list[int] = []
            if on_device:
                if name in _MATMULS:
                    rec.workspace(phase)
                if name in _attention.FUSED_BACKWARD:
                    extra = [rec.alloc(n, phase, op=f"{name} (CUDA buffer)")
                             for n in _attention.backward_buffers(name, args)]
            if name == "_local_scalar_dense" and rec.in_scaler_step:
                # GradScaler's step asks whether any gradient was inf or NaN (a value no fake
                # tensor has): none, as on a healthy run, so the optimizer steps. Values the
                # fake mode knows (the optimizer's step counts) are read as they are.
                try:
                    return func(*args, **kwargs)
                except Exception:
                    return 0.0 if args[0].is_floating_point() else 0
            if name == "_local_scalar_dense" and rec.step == 0:
                # A value read while the model is built (e.g. trunc_normal_'s rejection loop):
                # no memory depends on initial values, so a zero stands in for it.
                rec.capture.setup_reads += 1
                t = args[0]
                return False if t.dtype == torch.bool else (0.0 if t.is_floating_point() else 0)
            try:
                out = func(*args, **kwargs)
            except Exception as e:  # reported with the op's name
                raise _capture_error(func, e) from e
            if on_device and _uses_cudnn(name):
                rec.capture.cudnn_threads.add("backward" if phase == "backward" else "step")
            if on_device:
                host = _attention.host_outputs(name, args, kwargs)
                outs = out if host and isinstance(out, tuple) else (out,)
                for i, o in enumerate(outs):
                    if i in host:  # CUDA's kernel keeps this output on the host
                        continue
                    for t in _tensors_in(o, torch.Tensor):
                        rec.track(t.untyped_storage(), phase, name)
            for addr in extra:
                rec.free(addr)
            if on_device and name in _cudnn_conv.OPS and _cudnn_conv.enabled():
                # Each cuDNN call's workspace, after its outputs, freed as the call returns.
                for size in _cudnn_conv.workspaces(name, args, kwargs, out):
                    if size:
                        rec.free(rec.alloc(size, phase, "workspaces", "cuDNN conv workspace"))
            return out

    return Record()  # type: ignore[no-untyped-call]


def _uses_cudnn(name: str) -> bool:
    """Whether PyTorch runs this op through cuDNN on CUDA (its handle is then created):
    convolutions, batch norm (cudnn_batch_norm) and cuDNN attention."""
    return (name in _cudnn_conv.OPS or "batch_norm" in name or "cudnn" in name) and \
        _cudnn_conv.enabled()


def _autocast_fp32(name: str, args: Any, kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """What CUDA autocast does to an op of its fp32 lists, at the op's Python call: fp16/bf16
    tensor arguments cast to fp32, or dtype=float32 for the ops that take a dtype."""
    import torch

    low = (torch.float16, torch.bfloat16)
    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    if not any(t.dtype in low for t in tensors):
        return args, kwargs
    if name in _AUTOCAST_FP32_DTYPE:
        if kwargs.get("dtype") is None:
            kwargs = {**kwargs, "dtype": torch.float32}
        return args, kwargs

    def up(a: Any) -> Any:
        return a.float() if isinstance(a, torch.Tensor) and a.dtype in low else a

    return tuple(up(a) for a in args), {k: up(v) for k, v in kwargs.items()}


def _attention_as_cuda(rec: _Recorder, args: Any, kwargs: dict[str, Any]) -> Any:
    """F.scaled_dot_product_attention on the backend CUDA's dispatch would choose for rec.gpu
    (memscope._attention). Under autocast("cuda") its floating inputs are cast first, as CUDA
    autocast does for this op (lower precision list), and the backend runs without autocast."""
    import torch

    call, scale = _attention.parse_call(args, kwargs)
    assert rec.gpu is not None
    if rec.in_autocast():
        low = torch.get_autocast_dtype("cpu")

        def cast(t: Any) -> Any:
            if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != low:
                return t.to(low)
            return t

        call.q, call.k, call.v, call.mask = (cast(t) for t in (call.q, call.k, call.v,
                                                                call.mask))
    backend = _attention.choose_backend(call, rec.gpu)
    rec.count_attention(backend)
    with torch.autocast("cpu", enabled=False):
        return _attention.run(call, scale, backend)


def _capture_error(func: Any, e: Exception) -> CaptureError:
    name = str(func)
    kind = type(e).__name__
    if "DataDependent" in kind or "DynamicOutputShape" in kind:
        why = ("its output depends on tensor values (.item(), nonzero, boolean masks), which a "
               "capture without data cannot know")
    elif "Unsupported" in kind:
        why = "it has no fake (meta) kernel"
    else:
        why = f"{kind}: {e}"
    return CaptureError(f"memscope.estimate cannot capture op {name}: {why}", op=name)


@contextmanager
def _patched_torch(rec: _Recorder, gpu: _attention.Gpu, capacity: int) -> Iterator[None]:
    """What the capture changes in torch while it runs, undone after. Every replacement acts
    for the capturing thread alone (in_capture()); other threads get torch's own function."""
    with ExitStack() as stack:
        stack.enter_context(_fake_swap_patch())
        stack.enter_context(_autocast_patch(rec))
        stack.enter_context(_foreach_patch())
        stack.enter_context(_cuda_patch(gpu, capacity))
        stack.enter_context(_default_device_patch(rec))
        stack.enter_context(_grad_scaler_patch(rec))
        stack.enter_context(_thread_patch(rec))
        stack.enter_context(_hf_patches.patched_transformers(rec.count_attention))
        yield


@contextmanager
def _fake_swap_patch() -> Iterator[None]:
    """Module.cuda() swaps each fake parameter with its copy; swap_tensors refuses a tensor
    with weak references, and the fake mode keeps one in its memo (a cache) of each."""
    import torch.utils
    from torch._subclasses.fake_tensor import FakeTensor

    swap = torch.utils.swap_tensors

    def swap_fake(t1: Any, t2: Any) -> None:
        for t in (t1, t2):
            if isinstance(t, FakeTensor):
                memo = t.fake_mode.fake_tensor_converter.tensor_memo
                for k in [k for k, v in list(memo.items()) if v is t]:
                    del memo[k]
        swap(t1, t2)  # type: ignore[no-untyped-call]

    with replaced(torch.utils, "swap_tensors", swap_fake):
        yield


@contextmanager
def _autocast_patch(rec: _Recorder) -> Iterator[None]:
    """autocast("cuda") runs as CPU autocast (fp16 unless told), and counts in rec.autocast
    the enabled CUDA autocast regions the step is in."""
    import torch

    autocast = torch.amp.autocast_mode.autocast

    def cpu_autocast(self: Any, device_type: str, *args: Any, **kwargs: Any) -> None:
        self._memscope_cuda = device_type == "cuda"
        if device_type == "cuda":
            device_type = "cpu"
            if kwargs.get("dtype") is None and not args:
                kwargs["dtype"] = torch.float16
        init(self, device_type, *args, **kwargs)

    def enter(self: Any) -> Any:
        if getattr(self, "_memscope_cuda", False) and self._enabled:
            rec.autocast += 1
        return autocast_enter(self)

    def exit(self: Any, *exc: Any) -> Any:
        if getattr(self, "_memscope_cuda", False) and self._enabled:
            rec.autocast -= 1
        return autocast_exit(self, *exc)

    with ExitStack() as stack:
        init = stack.enter_context(replaced(autocast, "__init__", cpu_autocast))
        autocast_enter = stack.enter_context(replaced(autocast, "__enter__", enter))
        autocast_exit = stack.enter_context(replaced(autocast, "__exit__", exit))
        yield


@contextmanager
def _foreach_patch() -> Iterator[None]:
    """On CUDA, optimizers default to their foreach kernels (whole-list temporaries); PyTorch
    decides by the tensors' type and device, which for fake CPU tensors says no."""
    import torch.optim.optimizer as optimizer

    default_foreach = optimizer._default_to_fused_or_foreach

    def cuda_foreach(params: Any, differentiable: bool, use_fused: bool = False) -> Any:
        if differentiable:
            return False, False
        return use_fused, not use_fused

    # Each optimizer module imported the function by name: replace it there.
    holders = [m for name, m in list(sys.modules.items())
               if name.startswith("torch.optim") and m is not None
               and getattr(m, "_default_to_fused_or_foreach", None) is default_foreach]
    with ExitStack() as stack:
        for m in holders:
            stack.enter_context(replaced(m, "_default_to_fused_or_foreach", cuda_foreach))
        yield


def _for_user(fake: Callable[..., Any], real: Callable[..., Any]) -> Callable[..., Any]:
    """`fake` when the workload's code calls, `real` when PyTorch's own code does: it must keep
    seeing no CUDA, since its kernels run on the CPU. For replaced(), which adds one frame."""

    def query(*args: Any, **kwargs: Any) -> Any:
        # 0: query, 1: _replaced's wrapper, 2: the caller.
        caller = sys._getframe(2).f_code.co_filename
        return (real if "/torch/" in caller else fake)(*args, **kwargs)

    return query


def _device_index(call: str, device: Any) -> int:
    """The index a torch.cuda query names (None, 0, "cuda", "cuda:0", torch.device); a
    CaptureError naming the call for any other GPU: the capture stands in for one."""
    import torch

    index: Any = device
    if isinstance(device, torch.device):
        if device.type != "cuda":
            raise CaptureError(f"memscope.estimate: torch.cuda.{call}({device!r}): not a CUDA "
                               "device", op=f"torch.cuda.{call}")
        index = device.index
    elif isinstance(device, str):
        d = torch.device(device)
        index = d.index if d.type == "cuda" else -1
    if index is None or index == 0:
        return 0
    raise CaptureError(f"memscope.estimate: torch.cuda.{call}({device!r}): the capture stands in "
                       "for one GPU, device 0; estimate each GPU's share with its own step",
                       op=f"torch.cuda.{call}")


@dataclass(frozen=True)
class _DeviceProperties:
    """What torch.cuda.get_device_properties() answers inside a capture."""

    name: str
    major: int
    minor: int
    total_memory: int
    is_integrated: bool = False
    is_multi_gpu_board: bool = False


@contextmanager
def _cuda_patch(gpu: _attention.Gpu, capacity: int) -> Iterator[None]:
    """The step's code believes what it was written for: one CUDA device is there, the GPU
    `gpu` describes (count 1, its capability, bf16 from 8.0 on, `capacity` as its memory), and
    calls that would reach the CUDA runtime (synchronize, the allocator's statistics) do
    nothing. Only the user's code is told so: PyTorch's own code must keep seeing no CUDA."""
    import torch

    def capability(device: Any = None) -> tuple[int, int]:
        _device_index("get_device_capability", device)
        return gpu.major, gpu.minor

    def name(device: Any = None) -> str:
        _device_index("get_device_name", device)
        return gpu.name

    def properties(device: Any = None) -> _DeviceProperties:
        _device_index("get_device_properties", device)
        return _DeviceProperties(gpu.name, gpu.major, gpu.minor, capacity)

    def bf16(including_emulation: bool = True) -> bool:
        return gpu.major >= 8  # bfloat16 arithmetic: Ampere on

    def set_device(device: Any) -> None:
        _device_index("set_device", device)

    fakes: dict[str, Callable[..., Any]] = {
        "is_available": lambda: True,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "set_device": set_device,
        "get_device_capability": capability,
        "get_device_name": name,
        "get_device_properties": properties,
        "is_bf16_supported": bf16,
    }
    no_ops: dict[str, Callable[..., Any]] = {
        "synchronize": lambda device=None: None,
        "empty_cache": lambda: None,
        "reset_peak_memory_stats": lambda device=None: None,
        "reset_accumulated_memory_stats": lambda device=None: None,
    }
    with ExitStack() as stack:
        for attr, fake in fakes.items():
            stack.enter_context(replaced(torch.cuda, attr,
                                          _for_user(fake, getattr(torch.cuda, attr))))
        for attr, fn in no_ops.items():
            stack.enter_context(replaced(torch.cuda, attr, fn))
        yield


@contextmanager
def _default_device_patch(rec: _Recorder) -> Iterator[None]:
    """torch.set_default_device("cuda") inside the capture makes factory calls without a device
    device allocations (rec.default_cuda, read by the device rewrite) instead of installing
    PyTorch's DeviceContext, which would put "cuda" on them below the capture's rewrite and
    stay the thread's default after it. Other defaults go through to torch; whatever the step
    set, the thread's default device is put back when the capture ends."""
    import torch

    holder = torch._GLOBAL_DEVICE_CONTEXT  # thread-local: this thread's default device
    before = getattr(holder, "device_context", None)

    def is_cuda(device: Any) -> bool:
        if isinstance(device, int) and not isinstance(device, bool):
            return True  # an index of the current accelerator: the GPU the step is for
        try:
            return bool(torch.device(device).type == "cuda")
        except (TypeError, RuntimeError):
            return False

    def set_default(device: Any) -> None:
        if device is not None and is_cuda(device):
            rec.default_cuda = True
            return
        rec.default_cuda = False
        real_set(device)

    def get_default() -> Any:
        return torch.device("cuda", 0) if rec.default_cuda else real_get()

    with ExitStack() as stack:
        real_set = stack.enter_context(replaced(torch, "set_default_device", set_default))
        real_get = stack.enter_context(replaced(torch, "get_default_device",
                                                 _for_user(get_default, torch.get_default_device)))
        try:
            yield
        finally:
            rec.default_cuda = False
            if getattr(holder, "device_context", None) is not before:
                real_set(before.device if before is not None else None)


@contextmanager
def _grad_scaler_patch(rec: _Recorder) -> Iterator[None]:
    """GradScaler("cuda") stays enabled (PyTorch disables it, with a warning, where CUDA is
    not available), so its scale, found-inf and growth tensors are on the device as on a GPU;
    its step reads whether the gradients were finite (a value: .item()), which the capture
    answers "finite" (rec.in_scaler_step), so the optimizer's step runs as on a healthy run."""
    import torch.amp.grad_scaler as grad_scaler
    import torch.cuda.amp.common as amp_common

    scaler = grad_scaler.GradScaler

    def maybe_opt_step(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec.in_scaler_step += 1
        try:
            return real_step(self, *args, **kwargs)
        finally:
            rec.in_scaler_step -= 1

    with ExitStack() as stack:
        stack.enter_context(replaced(amp_common, "amp_definitely_not_available",
                                      lambda: False))
        real_step = stack.enter_context(replaced(scaler, "_maybe_opt_step", maybe_opt_step))
        yield


@contextmanager
def _thread_patch(rec: _Recorder) -> Iterator[None]:
    """Threads the capturing thread starts are noted (rec.threads): the capture cannot see
    what they run (PyTorch's modes are per thread), so a step that runs there is refused."""
    def start(self: threading.Thread) -> None:
        rec.threads.add(self)
        real_start(self)

    with replaced(threading.Thread, "start", start) as real_start:
        yield


class _Hooks:
    """The module, optimizer and saved-tensor hooks of a capture: they tell `rec` what each
    storage is (parameters, gradients, optimizer state, activations) and which module runs."""

    def __init__(self, rec: _Recorder) -> None:
        self.rec = rec
        self.params: dict[int, Any] = {}  # every parameter a forward used, weakly

    def name_of(self, module: Any) -> str:
        rec = self.rec
        name = rec.module_names.get(id(module))
        if name is None:
            name = type(module).__name__
            if not rec.module_stack:  # a root: name its submodules by their paths
                for sub_name, sub in module.named_modules():
                    rec.module_names.setdefault(id(sub), sub_name or name)
                name = rec.module_names.get(id(module), name)
        return name

    def mark_grads(self) -> None:
        for ref in list(self.params.values()):
            p = ref()
            if p is not None and p.grad is not None:
                self.rec.mark(p.grad, "gradients")

    def pre(self, module: Any, _args: Any) -> None:
        if not in_capture():
            if threading.current_thread() in self.rec.threads:
                self.rec.foreign_forward = threading.current_thread().name
            return
        for p in module.parameters(recurse=False):
            self.rec.mark(p, "parameters")
            if id(p) not in self.params:
                self.params[id(p)] = weakref.ref(p)
        for b in module.buffers(recurse=False):
            self.rec.mark(b, "parameters")
        self.rec.module_stack.append(self.name_of(module))

    def post(self, _module: Any, _args: Any, _out: Any) -> None:
        if in_capture() and self.rec.module_stack:
            self.rec.module_stack.pop()

    def opt_pre(self, opt: Any, _args: Any, _kwargs: Any) -> None:
        if not in_capture():
            return
        self.rec.in_optimizer += 1
        self.mark_grads()
        for group in opt.param_groups:
            for p in group["params"]:
                self.rec.mark(p, "parameters")
                if p.grad is not None:
                    self.rec.mark(p.grad, "gradients")

    def opt_post(self, opt: Any, _args: Any, _kwargs: Any) -> None:
        if not in_capture():
            return
        rec = self.rec
        rec.in_optimizer = max(0, rec.in_optimizer - 1)
        host_steps = not any(g.get("capturable") or g.get("fused") for g in opt.param_groups)
        for state in opt.state.values():
            for k, v in state.items():
                # Adam's and others' step counts stay on the host unless capturable or fused.
                host = k == "step" and host_steps and getattr(v, "dim", lambda: 1)() == 0
                rec.mark(v, "host" if host else "optimizer state")

    def pack(self, t: Any) -> Any:
        self.rec.mark(t, "activations")
        # Not `t` itself: a saved output holds its grad_fn, which holds what it saved, a
        # reference cycle that would keep activations alive until the garbage collector runs.
        # A detached alias shares the storage and holds no graph.
        return t.detach()

    @staticmethod
    def unpack(t: Any) -> Any:
        return t

    def install(self, stack: ExitStack) -> None:
        """Registers every hook, removed when `stack` closes."""
        import torch
        from torch.nn.modules.module import (
            register_module_forward_hook,
            register_module_forward_pre_hook,
        )
        from torch.optim.optimizer import (
            register_optimizer_step_post_hook,
            register_optimizer_step_pre_hook,
        )

        stack.callback(register_module_forward_pre_hook(self.pre).remove)
        stack.callback(register_module_forward_hook(self.post).remove)
        stack.callback(register_optimizer_step_pre_hook(self.opt_pre).remove)
        stack.callback(register_optimizer_step_post_hook(self.opt_post).remove)
        stack.enter_context(torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack))


def capture(workload: Callable[[int], Callable[[], Any]], batch: int, steps: int,
            workspace_bytes: int, gpu: Optional[_attention.Gpu] = None,
            capacity: int = 80 << 30) -> Capture:
    """Runs workload(batch) and its step `steps` times on fake tensors; see the module's doc.
    `gpu`: attention runs the backend CUDA would choose on it (None: as on the CPU), and the
    step's CUDA queries describe it (None: a Hopper-class GPU), with `capacity` as its memory.
    One capture runs at a time in a process: a second thread waits for the first; a capture
    started inside another (the workload calls estimate) raises UsageError."""
    if in_capture():
        raise UsageError("memscope.estimate: called inside a capture (the workload or its step "
                         "calls memscope.estimate or max_batch): call it outside the workload")
    with CAPTURE_LOCK.held():
        return _capture_owned(workload, batch, steps, workspace_bytes, gpu, capacity)


def _capture_owned(workload: Callable[[int], Callable[[], Any]], batch: int, steps: int,
                   workspace_bytes: int, gpu: Optional[_attention.Gpu],
                   capacity: int) -> Capture:
    """capture(), on the thread that holds CAPTURE_LOCK."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    rec = _Recorder(workspace_bytes, gpu)
    rec.steps = steps
    hooks = _Hooks(rec)
    with ExitStack() as stack:
        stack.enter_context(_patched_torch(
            rec, gpu if gpu is not None else _attention.gpu_for("cuda"), capacity))
        stack.enter_context(FakeTensorMode(allow_non_fake_inputs=True))
        stack.enter_context(_record_mode(rec))
        stack.enter_context(_device_rewrite_mode(rec))
        hooks.install(stack)
        try:
            _run_steps(rec, hooks, workload, batch, steps)
        except CaptureError:
            raise
        except SystemExit as e:  # sys.exit() in the workload: not a capture's end
            raise CaptureError(
                f"memscope.estimate: the workload called sys.exit({e.code!r}) during "
                f"{'the step' if rec.step else 'setup'}; the step must return, not end the "
                "process") from e
        except Exception as e:
            if isinstance(e.__cause__, CaptureError):
                raise e.__cause__ from e
            raise CaptureError(f"memscope.estimate: the workload failed during capture: "
                               f"{type(e).__name__}: {e}") from e
        finally:
            rec.step = steps + 1
    return rec.capture


def _run_steps(rec: _Recorder, hooks: _Hooks, workload: Callable[[int], Callable[[], Any]],
               batch: int, steps: int) -> None:
    """workload(batch) builds the model (step 0), then its step runs `steps` times."""
    step = workload(batch)
    if not callable(step):
        raise CaptureError(
            f"memscope.estimate: the workload returned {type(step).__name__}, not the "
            "step function (def workload(batch): ...; return train_step)")
    for i in range(1, steps + 1):
        rec.step = i
        rec.capture.step_starts.append(len(rec.capture.events))
        _check_ran_here(rec, i, step())
        rec.module_stack.clear()
        hooks.mark_grads()  # gradients a step keeps (no optimizer, or no zero_grad)
        rec.capture.step_ends.append(len(rec.capture.events))


def _check_ran_here(rec: _Recorder, i: int, returned: Any) -> None:
    """A step whose work the capture cannot see would be estimated at the parameters alone and
    "fit": one written as a generator or coroutine (calling it runs nothing), one that runs its
    work on another thread (PyTorch's modes are per thread), one that allocates nothing."""
    if inspect.isgenerator(returned) or inspect.iscoroutine(returned):
        kind = "a generator" if inspect.isgenerator(returned) else "a coroutine (async def)"
        returned.close()
        raise CaptureError(f"memscope.estimate: the step is {kind}: calling it runs none of "
                           "its body; return a plain function that runs one training step")
    if rec.foreign_forward:
        raise CaptureError(f"memscope.estimate: step {i} ran a module on thread "
                           f"{rec.foreign_forward!r}, which the capture cannot see; run the step "
                           "on the thread that calls estimate")
    if rec.capture.step_starts[-1] == len(rec.capture.events):
        started = " (it started threads: the capture sees only its own)" if rec.threads else ""
        raise CaptureError(f"memscope.estimate: step {i} allocated no GPU memory{started}; the "
                           "step must run its work on \"cuda\" tensors, on the calling thread, "
                           "before it returns")
