// memscope.Buffer: an allocation that frees itself, readable in place by numpy (buffer protocol,
// __array_interface__) or by CUDA libraries (__cuda_array_interface__), never by copying.
//
// Safety rules, checked here rather than trusted to the caller:
//  - freeing twice raises InvalidPointerError; every use after free (address, views) too;
//  - free() while memoryviews or numpy arrays made through the buffer protocol are alive raises
//    BufferError (as memoryview.release() does), so those views never see freed memory;
//  - the array-interface dicts own a share of the allocation (key "memscope_owner"), because
//    their consumers (numpy, CuPy, PyTorch, Numba) keep the object that carried the dict alive
//    but cannot be counted: after free() or collection of the Buffer the memory goes back to
//    the allocator only when the last such consumer is gone;
//  - consumers may instead keep the Buffer itself (torch.frombuffer releases its Py_buffer at
//    once and keeps a reference) or an object forwarding to it (numpy through an
//    __array_interface__ property): so free() of a Buffer whose address was ever lent ends the
//    Buffer at once but returns its memory only when the Buffer object is collected, the same
//    for host, device and simulated memory (docs/design.md, "Buffers");
//  - simulated memory has nothing behind its addresses: it exposes the address and refuses
//    every view; device memory refuses CPU views and host memory refuses CUDA ones.
#include <fmt/format.h>
#include <nanobind/stl/string.h>

#include "bindings.hpp"
#include "errors.hpp"
#include "handles.hpp"
#include "python_stacks.hpp"
#include "registry.hpp"

namespace memscope::python {
namespace {

void check_live(const Buffer& b) {
  if (b.freed) {
    raise(error_types().invalid_pointer,
          "this memscope.Buffer has been freed; its memory may belong to someone else now");
  }
}

std::uintptr_t address_of(const Buffer& b) {
  return reinterpret_cast<std::uintptr_t>(b.ptr);
}

// A zero-byte buffer has no allocation; views still need a non-null pointer.
char empty_storage[1];

void* data_of(Buffer& b) {
  return b.ptr != nullptr ? b.ptr : static_cast<void*>(empty_storage);
}

int get_buffer(PyObject* self, Py_buffer* view, int flags) noexcept {
  Buffer* b = nb::inst_ptr<Buffer>(self);
  if (b->freed) {
    PyErr_SetString(error_types().invalid_pointer, "this memscope.Buffer has been freed");
    return -1;
  }
  if (b->kind == MemoryKind::simulated) {
    PyErr_SetString(PyExc_BufferError,
                    "simulated memory has no bytes behind its addresses; only .address is "
                    "available");
    return -1;
  }
  if (b->kind == MemoryKind::device) {
    PyErr_SetString(PyExc_BufferError,
                    "device memory cannot be read by the CPU; use __cuda_array_interface__ "
                    "(CuPy, PyTorch, Numba)");
    return -1;
  }
  if (PyBuffer_FillInfo(view, self, data_of(*b), static_cast<Py_ssize_t>(b->nbytes), 0, flags) !=
      0) {
    return -1;
  }
  ++b->exports;
  b->lent = true;
  return 0;
}

void release_buffer(PyObject* self, Py_buffer* /*view*/) noexcept {
  --nb::inst_ptr<Buffer>(self)->exports;
}

PyType_Slot buffer_slots[] = {
    {Py_bf_getbuffer, reinterpret_cast<void*>(get_buffer)},
    {Py_bf_releasebuffer, reinterpret_cast<void*>(release_buffer)},
    {0, nullptr},
};

void free_buffer(Buffer& b) {
  check_live(b);
  if (b.exports > 0) {
    raise(PyExc_BufferError,
          fmt::format("cannot free: {} view(s) of this buffer (memoryview or numpy array) are "
                      "still alive; delete them first",
                      b.exports));
  }
  b.release();  // under the GIL: a deallocation never blocks, and two threads cannot both free
}

// A share of the allocation for a consumer: deleting the capsule drops it.
nb::capsule memory_share(const Buffer& b) {
  auto* share = new std::shared_ptr<BufferMemory>(b.memory);
  return nb::capsule(share, "memscope.BufferMemory", [](void* p) noexcept {
    delete static_cast<std::shared_ptr<BufferMemory>*>(p);
  });
}

nb::dict array_interface(Buffer& b, bool cuda) {
  nb::dict d;
  d["shape"] = nb::make_tuple(b.nbytes);
  d["typestr"] = "|u1";
  d["data"] = nb::make_tuple(reinterpret_cast<std::uintptr_t>(data_of(b)), false);
  d["strides"] = nb::none();
  d["version"] = 3;
  // Fresh memory carries no pending work a consumer must wait for.
  if (cuda) d["stream"] = nb::none();
  if (b.memory) d["memscope_owner"] = memory_share(b);
  b.lent = true;
  return d;
}

}  // namespace

BufferMemory::BufferMemory(std::shared_ptr<CachingAllocator> a, void* p)
    : allocator(std::move(a)), ptr(p) {
  claim_buffer_address(allocator.get(), reinterpret_cast<std::uintptr_t>(ptr));
}

BufferMemory::~BufferMemory() noexcept {
  release_buffer_address(allocator.get(), reinterpret_cast<std::uintptr_t>(ptr));
  (void)allocator->try_deallocate(ptr);
}

bool Buffer::release() noexcept {
  if (freed) return false;
  freed = true;
  // A lent Buffer keeps its memory until it is collected (~Buffer): whoever holds it may still
  // read the bytes. Under the GIL: a deallocation never blocks.
  if (!lent) memory.reset();
  return true;
}

nb::object make_buffer(nb::handle owner, std::size_t nbytes, StreamId stream) {
  const auto& allocator = nb::cast<PyAllocator&>(owner).impl;
  void* ptr = nullptr;
  {
    const PythonStackPrecapture frames(*allocator);  // recorded Python frames, before the GIL goes
    nb::gil_scoped_release unlocked;
    ptr = allocator->allocate(nbytes, stream);
  }
  auto* b = new Buffer;
  b->allocator = allocator;
  b->owner = nb::borrow(owner);
  b->ptr = ptr;
  b->nbytes = nbytes;
  b->stream = stream;
  b->kind = allocator->backend().memory_kind();
  if (ptr != nullptr) b->memory = std::make_shared<BufferMemory>(allocator, ptr);
  return nb::cast(b, nb::rv_policy::take_ownership);
}

namespace {

// numpy's and CUDA's array interfaces: the one for the buffer's kind of memory, an
// AttributeError naming the right one for the other (so hasattr() tells consumers which).
void def_array_interfaces(nb::class_<Buffer>& cls) {
  cls.def_prop_ro("__array_interface__",
                  [](Buffer& b) {
                    check_live(b);
                    if (b.kind != MemoryKind::host) {
                      throw nb::attribute_error(b.kind == MemoryKind::device
                                                    ? "device memory: use __cuda_array_interface__"
                                                    : "simulated memory has no bytes behind it");
                    }
                    return array_interface(b, false);
                  })
      .def_prop_ro("__cuda_array_interface__", [](Buffer& b) {
        check_live(b);
        if (b.kind != MemoryKind::device) {
          throw nb::attribute_error(b.kind == MemoryKind::host
                                        ? "host memory: use the buffer protocol or "
                                          "__array_interface__"
                                        : "simulated memory has no bytes behind it");
        }
        return array_interface(b, true);
      });
}

}  // namespace

void bind_buffer(nb::module_& m) {
  nb::class_<Buffer> cls(
      m, "Buffer", nb::type_slots(buffer_slots),
      "One allocation from a memscope allocator; frees itself when collected.\n\n"
      "Host memory supports the buffer protocol and __array_interface__ "
      "(numpy.asarray(buf) is a zero-copy uint8 view); device memory supports "
      "__cuda_array_interface__; simulated memory has an address only.");
  def_array_interfaces(cls);
  cls.def_prop_ro(
         "address",
         [](const Buffer& b) {
           check_live(b);
           return address_of(b);
         },
         "The allocation's address (refused after free).")
      .def_prop_ro(
          "nbytes", [](const Buffer& b) { return b.nbytes; }, "Bytes requested.")
      .def("__len__",
           [](const Buffer& b) {
             check_live(b);
             return b.nbytes;
           })
      .def_prop_ro(
          "kind", [](const Buffer& b) { return kind_name(b.kind); },
          "\"host\", \"device\" or \"simulated\".")
      .def_prop_ro(
          "device", [](const Buffer& b) { return b.allocator->backend().name(); },
          "The backend spec of its allocator, e.g. \"host\" or \"cuda:0\".")
      .def_prop_ro("stream", [](const Buffer& b) { return b.stream; })
      .def_prop_ro("allocator", [](const Buffer& b) { return b.owner; })
      .def_prop_ro("freed", [](const Buffer& b) { return b.freed; })
      .def_prop_ro(
          "size",
          [](const Buffer& b) {
            check_live(b);
            return b.allocator->lookup(b.ptr).size;
          },
          "Bytes the allocator set aside (the request rounded up).")
      .def("free", &free_buffer,
           "Ends the Buffer (every later use raises InvalidPointerError) and returns its memory "
           "to the allocator: now if its address was never lent; if it was (buffer protocol, "
           "__array_interface__, __cuda_array_interface__: torch.frombuffer and the like keep a "
           "reference to the Buffer), when the Buffer object is collected and no array built "
           "from an interface dict holds the memory. Raises InvalidPointerError if already "
           "freed and BufferError while buffer-protocol views (memoryview, numpy.asarray) of it "
           "are alive.")
      .def(
          "record_stream",
          [](Buffer& b, nb::handle stream) {
            check_live(b);
            if (b.ptr == nullptr) return;
            const StreamId s = to_stream(stream);
            nb::gil_scoped_release unlocked;
            b.allocator->record_stream(b.ptr, s);
          },
          nb::arg("stream").none(),
          "Marks the memory as used by work on `stream`: after free it is not reused until that "
          "work has completed.")
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__",
           [](Buffer& b, const nb::args&) {
             if (!b.freed) free_buffer(b);
           })
      .def("__repr__", [](const Buffer& b) {
        if (b.freed) return fmt::format("<memscope.Buffer freed, {} bytes>", b.nbytes);
        return fmt::format("<memscope.Buffer {} bytes at {:#x} on {} ({})>", b.nbytes,
                           address_of(b), b.allocator->backend().name(), kind_name(b.kind));
      });
}

namespace {

// An unsigned 64-bit argument from any Python integer (int, numpy integer, anything with
// __index__): a TypeError naming `what` for other types, a ValueError outside [0, 2^64).
std::uint64_t to_unsigned(nb::handle value, const char* what) {
  PyObject* index = PyNumber_Index(value.ptr());
  if (index == nullptr) {
    PyErr_Clear();
    raise(PyExc_TypeError,
          fmt::format("{} must be an int, not {}", what, nb::type_name(value.type()).c_str()));
  }
  const nb::object number = nb::steal(index);
  const unsigned long long v = PyLong_AsUnsignedLongLong(number.ptr());
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred() != nullptr) {
    PyErr_Clear();
    raise(PyExc_ValueError,
          fmt::format("{} must be between 0 and 2**64 - 1, got {}", what, nb::str(number).c_str()));
  }
  return v;
}

}  // namespace

StreamId to_stream(nb::handle stream) {
  if (stream.is_none()) return kDefaultStream;
  if (nb::hasattr(stream, "cuda_stream")) {
    return to_unsigned(stream.attr("cuda_stream"), "stream (its cuda_stream)");
  }
  if (nb::hasattr(stream, "ptr") && !PyLong_Check(stream.ptr())) {
    return to_unsigned(stream.attr("ptr"), "stream (its ptr)");
  }
  return to_unsigned(stream, "stream");
}

std::uintptr_t to_address(nb::handle address) {
  if (nb::isinstance<Buffer>(address)) {
    const Buffer& b = nb::cast<const Buffer&>(address);
    check_live(b);
    return address_of(b);
  }
  return to_unsigned(address, "address");
}

}  // namespace memscope::python
