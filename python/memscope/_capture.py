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
  fp32 buffers of the flash-attention backward pass. ``NOT_MODELED`` lists what is not.
- Categories come from what tensors are: module parameters (seen by global forward hooks),
  their ``.grad``, optimizer state (global optimizer step hooks), tensors autograd saves for
  backward (saved-tensor hooks); everything else is a temporary.
- While it runs, ``torch.cuda.is_available()`` is True when the workload's own code asks (it
  believes the GPU it was written for is there; PyTorch's code still sees none), and
  ``synchronize``, ``empty_cache`` and the peak resets do nothing.
- ``torch.autocast("cuda", ...)`` becomes CPU autocast with the same dtype, and the ops CUDA
  autocast runs in fp32 get fp32 inputs at their Python call (see NOT_MODELED).
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, Optional

from ._frames import StackTable
from ._memscope import Error

# cuBLAS's workspace per (handle, stream): PyTorch's default, in
# aten/src/ATen/cuda/CublasHandlePool.cpp (parseChosenWorkspaceSize): ":4096:8" = 32 MiB on
# compute capability 9.x and newer (Hopper, Blackwell), ":4096:2:16:8" = 8 MiB + 128 KiB
# before. It is allocated through the caching allocator at a thread's first matrix multiply
# and kept; autograd's backward runs on its own thread, hence its own handle and workspace.
CUBLAS_WORKSPACE_SM90 = 4096 * 8 * 1024
CUBLAS_WORKSPACE_OLDER = 4096 * 1024 * 2 + 16 * 1024 * 8

CATEGORIES = ("host", "parameters", "gradients", "optimizer state", "activations",
              "temporaries", "workspaces")  # "host": recorded, then found to live on the host

NOT_MODELED = (
    "cuDNN workspaces (convolutions): cuDNN picks algorithms and their workspace on the GPU; "
    "a conv net's peak may be higher than estimated",
    "the memory-efficient attention kernel's backward workspace (fp32 scaled-dot-product "
    "attention); flash attention's fp32 buffers are modelled",
    "kernels PyTorch's CPU dispatch picks differently from CUDA's: where CPU attention falls "
    "back to the math path but CUDA would use a fused kernel, the estimate is high",
    "autocast(\"cuda\") runs as CPU autocast with the same dtype, and CUDA autocast's fp32 "
    "ops are cast at their Python call (torch.exp, F.softmax, F.cross_entropy, ...); an op "
    "called from C++ inside another (a composite) follows CPU autocast's lists",
    "the CUDA context, cuBLAS/cuDNN handles and NCCL buffers (outside the caching allocator; "
    "the capacity is what the allocator may use)",
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
_FLASH_BACKWARD = frozenset(
    ("_scaled_dot_product_flash_attention_for_cpu_backward",
     "_scaled_dot_product_flash_attention_backward"))


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

    def __init__(self, workspace_bytes: int) -> None:
        self.capture = Capture(workspace_bytes=workspace_bytes)
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
            if name in ("cuda", "to") and args and isinstance(args[0], torch.Tensor):
                t = args[0]
                if name == "cuda":
                    dtype, fmt, moved = None, kwargs.get("memory_format"), True
                else:
                    target, dtype, _, fmt = torch._C._nn._parse_to(*args[1:], **kwargs)
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
            if "device" in kwargs:
                kwargs["device"], moved = _rewrite_device(kwargs["device"])
            if rec.autocast and (name in _AUTOCAST_FP32 or name in _AUTOCAST_FP32_DTYPE):
                args, kwargs = _autocast_fp32(name, args, kwargs)
            if not moved:
                return func(*args, **kwargs)
            rec.device_depth += 1
            try:
                return func(*args, **kwargs)
            finally:
                rec.device_depth -= 1

    return DeviceRewrite()


def _record_mode(rec: _Recorder) -> Any:
    """A TorchDispatchMode that records every storage an op creates on the device into `rec`."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class Record(TorchDispatchMode):  # type: ignore[no-untyped-call]
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            rec.capture.ops += 1
            inputs = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
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
                if name in _FLASH_BACKWARD:
                    extra = [rec.alloc(n, phase, op=f"{name} (CUDA buffer)")
                             for n in _flash_backward_buffers(args)]
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
            if on_device:
                for t in tree_flatten(out)[0]:
                    if isinstance(t, torch.Tensor):
                        rec.track(t.untyped_storage(), phase, name)
            for addr in extra:
                rec.free(addr)
            return out

    return Record()  # type: ignore[no-untyped-call]


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


def _flash_backward_buffers(args: Any) -> list[int]:
    """Bytes of the fp32 buffers CUDA's flash-attention backward allocates (flash_api.cpp,
    mha_bwd): softmax_d (batch, heads, seqlen_q rounded up to 128) and dq_accum (batch,
    seqlen_q rounded to 128, heads, head_dim rounded to 32, or 64 above 128). Half precision
    only: CUDA runs fp32 attention on another kernel."""
    import torch

    q = args[1] if len(args) > 1 else None
    if not isinstance(q, torch.Tensor) or q.dim() != 4 or q.dtype == torch.float32:
        return []
    b, h, lq, d = (int(x) for x in q.shape)
    lq_r = (lq + 127) // 128 * 128
    d_r = (d + 31) // 32 * 32 if d <= 128 else (d + 63) // 64 * 64
    return [b * h * lq_r * 4, b * lq_r * h * d_r * 4]


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
def _patched_torch(on_enter: Callable[[int], None]) -> Iterator[None]:
    """What the capture changes in torch while it runs, undone after."""
    with ExitStack() as stack:
        stack.enter_context(_fake_swap_patch())
        stack.enter_context(_autocast_patch(on_enter))
        stack.enter_context(_foreach_patch())
        stack.enter_context(_cuda_patch())
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

    torch.utils.swap_tensors = swap_fake
    try:
        yield
    finally:
        torch.utils.swap_tensors = swap


@contextmanager
def _autocast_patch(on_enter: Callable[[int], None]) -> Iterator[None]:
    """autocast("cuda") runs as CPU autocast (fp16 unless told), and tells `on_enter` (+1, -1)
    when an enabled CUDA autocast region is entered and left."""
    import torch

    autocast = torch.amp.autocast_mode.autocast
    autocast_init, autocast_enter, autocast_exit = (
        autocast.__init__, autocast.__enter__, autocast.__exit__)

    def cpu_autocast(self: Any, device_type: str, *args: Any, **kwargs: Any) -> None:
        self._memscope_cuda = device_type == "cuda"
        if device_type == "cuda":
            device_type = "cpu"
            if kwargs.get("dtype") is None and not args:
                kwargs["dtype"] = torch.float16
        autocast_init(self, device_type, *args, **kwargs)

    def enter(self: Any) -> Any:
        if getattr(self, "_memscope_cuda", False) and self._enabled:
            on_enter(1)
        return autocast_enter(self)  # type: ignore[no-untyped-call]

    def exit(self: Any, *exc: Any) -> Any:
        if getattr(self, "_memscope_cuda", False) and self._enabled:
            on_enter(-1)
        return autocast_exit(self, *exc)

    autocast.__init__ = cpu_autocast  # type: ignore[method-assign]
    autocast.__enter__ = enter  # type: ignore[method-assign]
    autocast.__exit__ = exit  # type: ignore[method-assign]
    try:
        yield
    finally:
        autocast.__init__ = autocast_init  # type: ignore[method-assign]
        autocast.__enter__ = autocast_enter  # type: ignore[method-assign]
        autocast.__exit__ = autocast_exit  # type: ignore[method-assign]


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
    for m in holders:
        m._default_to_fused_or_foreach = cuda_foreach  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for m in holders:
            m._default_to_fused_or_foreach = default_foreach  # type: ignore[attr-defined]


@contextmanager
def _cuda_patch() -> Iterator[None]:
    """The step's code believes what it was written for: a CUDA device is there. Calls that
    would reach the CUDA runtime (synchronize, the allocator's statistics) do nothing. Only the
    user's code is told so: PyTorch's own code must keep seeing no CUDA."""
    import torch

    real_available = torch.cuda.is_available

    def is_available() -> bool:
        caller = sys._getframe(1).f_code.co_filename
        return "/torch/" not in caller or bool(real_available())

    cuda_patches: dict[str, Any] = {
        "is_available": is_available,
        "synchronize": lambda device=None: None,
        "empty_cache": lambda: None,
        "reset_peak_memory_stats": lambda device=None: None,
        "reset_accumulated_memory_stats": lambda device=None: None,
    }
    cuda_saved = {name: getattr(torch.cuda, name) for name in cuda_patches}
    for name, fn in cuda_patches.items():
        setattr(torch.cuda, name, fn)
    try:
        yield
    finally:
        for name, fn in cuda_saved.items():
            setattr(torch.cuda, name, fn)


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
        for p in module.parameters(recurse=False):
            self.rec.mark(p, "parameters")
            if id(p) not in self.params:
                self.params[id(p)] = weakref.ref(p)
        for b in module.buffers(recurse=False):
            self.rec.mark(b, "parameters")
        self.rec.module_stack.append(self.name_of(module))

    def post(self, _module: Any, _args: Any, _out: Any) -> None:
        if self.rec.module_stack:
            self.rec.module_stack.pop()

    def opt_pre(self, opt: Any, _args: Any, _kwargs: Any) -> None:
        self.rec.in_optimizer += 1
        self.mark_grads()
        for group in opt.param_groups:
            for p in group["params"]:
                self.rec.mark(p, "parameters")
                if p.grad is not None:
                    self.rec.mark(p.grad, "gradients")

    def opt_post(self, opt: Any, _args: Any, _kwargs: Any) -> None:
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
            workspace_bytes: int) -> Capture:
    """Runs workload(batch) and its step `steps` times on fake tensors; see the module's doc."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    rec = _Recorder(workspace_bytes)
    rec.steps = steps
    hooks = _Hooks(rec)

    def on_autocast(delta: int) -> None:
        rec.autocast += delta

    with ExitStack() as stack:
        stack.enter_context(_patched_torch(on_autocast))
        stack.enter_context(FakeTensorMode(allow_non_fake_inputs=True))
        stack.enter_context(_record_mode(rec))
        stack.enter_context(_device_rewrite_mode(rec))
        hooks.install(stack)
        try:
            _run_steps(rec, hooks, workload, batch, steps)
        except CaptureError:
            raise
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
        step()
        rec.module_stack.clear()
        hooks.mark_grads()  # gradients a step keeps (no optimizer, or no zero_grad)
        rec.capture.step_ends.append(len(rec.capture.events))
