"""C++ errors arrive as memscope's exception types, which are also the builtins users expect."""

from __future__ import annotations

import pytest

import memscope

from conftest import GiB, MiB


@pytest.mark.parametrize("name, builtin", [
    ("OutOfMemoryError", MemoryError),
    ("ConfigError", ValueError),
    ("InvalidPointerError", ValueError),
    ("TraceFormatError", ValueError),
    ("BackendUnavailableError", RuntimeError),
    ("BackendError", RuntimeError),
    ("UsageError", RuntimeError),
])
def test_hierarchy(name: str, builtin: type) -> None:
    cls = getattr(memscope, name)
    assert issubclass(cls, memscope.Error)
    assert issubclass(cls, builtin)
    assert cls.__module__ == "memscope"


def test_oom_on_simulated_device_keeps_the_allocator_usable() -> None:
    a = memscope.Allocator("sim:1GiB", config="")
    kept = a.alloc(256 * MiB)
    with pytest.raises(memscope.OutOfMemoryError) as info:
        a.alloc(1 * GiB)
    e = info.value
    assert isinstance(e, MemoryError)
    assert e.requested == 1 * GiB and e.capacity == 1 * GiB
    assert e.allocated == 256 * MiB and e.reserved == a.memory_reserved()
    assert e.figures["limit"] == 1 * GiB
    assert "1.00 GiB" in str(e)
    assert a.memory_stats()["num_ooms"] == 1
    # Nothing already allocated is harmed and the allocator still works.
    assert a.lookup(kept)["requested_size"] == 256 * MiB
    p = a.alloc(512 * MiB)
    a.free(p)
    a.free(kept)
    assert a.memory_allocated() == 0


def test_config_error_names_the_key() -> None:
    with pytest.raises(memscope.ConfigError) as info:
        memscope.Allocator("sim:1GiB", config="max_split_sise:256MiB")
    assert info.value.key == "max_split_sise"
    assert "max_split_sise" in str(info.value)
    with pytest.raises(ValueError) as bad_value:
        memscope.Allocator("sim:1GiB", config="garbage_collection_threshold:2")
    assert bad_value.value.key == "garbage_collection_threshold"
    assert bad_value.value.value == "2"


def test_bad_env_config_raises_config_error_naming_the_key(clean_env: pytest.MonkeyPatch,
                                                           sim_spec: str) -> None:
    clean_env.setenv("MEMSCOPE_ALLOC_CONF", "roundup_power2_divisions:3")
    with pytest.raises(memscope.ConfigError) as info:
        memscope.memory_allocated(sim_spec)  # the default allocator is created here
    assert info.value.key == "roundup_power2_divisions"
    with pytest.raises(memscope.ConfigError):
        memscope.Allocator("sim:1GiB")  # config=None reads the environment too
    clean_env.setenv("MEMSCOPE_ALLOC_CONF", "max_split_size:64MiB")
    assert memscope.Allocator("sim:1GiB").config == "max_split_size:64MiB"
    assert memscope.memory_allocated(sim_spec) == 0  # a later call succeeds


def test_backend_spec_errors() -> None:
    with pytest.raises(memscope.ConfigError) as info:
        memscope.Allocator("tpu:0")
    assert info.value.key == "backend"
    with pytest.raises(memscope.ConfigError):
        memscope.Allocator("sim:lots")


def test_cuda_without_gpu_is_unavailable_with_a_reason() -> None:
    available, reason = memscope._memscope._cuda_available()
    if available:
        pytest.skip("a GPU is present")
    assert reason
    with pytest.raises(memscope.BackendUnavailableError) as info:
        memscope.Allocator("cuda:0")
    assert str(info.value)
    with pytest.raises(memscope.BackendUnavailableError):
        memscope.memory_allocated(0)


def test_parse_size_errors() -> None:
    assert memscope.parse_size("1.5 GiB") == 3 * GiB // 2
    assert memscope.format_size_exact(24 * GiB) == "24GiB"
    assert memscope.format_bytes(3 * GiB // 2) == "1.50 GiB"
    with pytest.raises(memscope.ConfigError):
        memscope.parse_size("twelve")


# ---- Issue 29.7, 29.8: inputs that once gave untyped errors or were accepted silently -------


class _NamelessSource:
    """A Python memory source whose name is not a str."""

    name, kind, available, reason, mode = 5, "gpu", True, "", "given"

    def current(self) -> int:
        return 0

    def open_window(self) -> object:
        class Window:
            begin = 0

            def close(self) -> tuple[int, int]:
                return 0, 0

        return Window()


def test_a_source_name_that_is_not_a_str_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="name must be a str, not int"):
        memscope.Tracker([_NamelessSource()], implicit_init=False).sources()


@pytest.mark.parametrize("call", [
    lambda: memscope.Tracker(implicit_init=False).stage("\udc80").__enter__(),
    lambda: memscope.metrics_format({"a\udc80": 1}),
    lambda: memscope.metrics_format({"a": "v\udc80"}),
])
def test_lone_surrogates_are_a_value_error_naming_the_text(call) -> None:
    with pytest.raises(ValueError, match="lone surrogate"):
        call()


def test_json_trace_with_a_byte_that_is_not_utf8_is_a_trace_format_error(tmp_path) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(b'{"segments": [], "device_traces": [[{"action": "alloc", "addr": 512, '
                     b'"size": 512, "stream": 0, "frames": [{"filename": "a\xff", "line": 1, '
                     b'"name": "f"}]}]]}')
    with pytest.raises(memscope.TraceFormatError, match=r"t\.json"):
        memscope.load_trace(path)


@pytest.mark.parametrize("device", ["abc", 2**100, "cuda:-1"])
def test_set_device_refuses_what_names_no_device(device: object) -> None:
    before = memscope.current_device()
    with pytest.raises(memscope.ConfigError):
        memscope.set_device(device)  # type: ignore[arg-type]
    assert memscope.current_device() == before
