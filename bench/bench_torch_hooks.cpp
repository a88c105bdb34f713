// Cost of the PyTorch allocator hooks (python/src/torch_hooks.cpp): one memscope_torch_malloc +
// memscope_torch_free pair called as PyTorch calls them, through pointers dlsym() found in the
// extension module, against the same pair on a CachingAllocator called directly in the same
// run (same backend, same configuration, the cache-hit path of both). The hooks are pointed at
// a simulated device, so no GPU is needed; they run without the GIL, as on PyTorch's threads.
//
// The hooks live in the Python extension, which needs libpython's symbols, so this program
// embeds Python to load it: PYTHONPATH=<build>/python <build>/python/memscope_bench_torch_hooks
// (built with -DMEMSCOPE_BUILD_PYTHON=ON; the target is defined in python/CMakeLists.txt).
// Timings on a shared 2-core machine are noisy; the hooks' own instructions per malloc+free
// pair are exact under callgrind: valgrind --tool=callgrind --toggle-collect='*BM_HookMallocFree*'
// with --benchmark_filter=BM_HookMallocFree/threads:1, then the inclusive cost of
// memscope_torch_malloc/free minus that of CachingAllocator::allocate/try_deallocate, per call.
#include <Python.h>
#include <dlfcn.h>
#include <sys/types.h>

#include <cstdio>
#include <memory>

#include <benchmark/benchmark.h>

#include "memscope/backend.hpp"
#include "memscope/caching_allocator.hpp"

namespace {

constexpr const char* kSpec = "sim:8GiB";
constexpr ssize_t kSize = 1 << 20;  // 1 MiB: the small pool, a cache hit after the first pair

using MallocFn = void* (*)(ssize_t, int, void*);
using FreeFn = void (*)(void*, ssize_t, int, void*);
MallocFn hook_malloc = nullptr;
FreeFn hook_free = nullptr;

void BM_HookMallocFree(benchmark::State& state) {
  for (auto _ : state) {
    void* p = hook_malloc(kSize, 0, nullptr);
    benchmark::DoNotOptimize(p);
    hook_free(p, kSize, 0, nullptr);
  }
}
BENCHMARK(BM_HookMallocFree)->Threads(1)->Threads(2);

memscope::CachingAllocator& direct_allocator() {
  static memscope::CachingAllocator allocator(memscope::make_backend(kSpec),
                                              memscope::AllocatorConfig::from_env());
  return allocator;
}

void BM_DirectAllocateDeallocate(benchmark::State& state) {
  memscope::CachingAllocator& allocator = direct_allocator();
  for (auto _ : state) {
    void* p = allocator.allocate(static_cast<std::size_t>(kSize));
    benchmark::DoNotOptimize(p);
    allocator.deallocate(p);
  }
}
BENCHMARK(BM_DirectAllocateDeallocate)->Threads(1)->Threads(2);

// Imports memscope._memscope, points its hooks at kSpec and finds them; false on failure.
bool load_hooks() {
  PyObject* module = PyImport_ImportModule("memscope._memscope");
  if (module == nullptr) return false;
  PyObject* done = PyObject_CallMethod(module, "_redirect_torch_hooks", "s", kSpec);
  PyObject* file = PyObject_GetAttrString(module, "__file__");
  const char* path = file != nullptr ? PyUnicode_AsUTF8(file) : nullptr;
  void* library = path != nullptr ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  if (library != nullptr) {
    hook_malloc = reinterpret_cast<MallocFn>(dlsym(library, "memscope_torch_malloc"));
    hook_free = reinterpret_cast<FreeFn>(dlsym(library, "memscope_torch_free"));
  }
  Py_XDECREF(file);
  Py_XDECREF(done);
  Py_DECREF(module);
  return done != nullptr && hook_malloc != nullptr && hook_free != nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  Py_Initialize();
  if (!load_hooks()) {
    if (PyErr_Occurred() != nullptr) PyErr_Print();
    std::fprintf(stderr, "cannot load the hooks from memscope._memscope (is PYTHONPATH set?)\n");
    return 1;
  }
  benchmark::AddCustomContext("memscope.hooks", kSpec);
  PyThreadState* python = PyEval_SaveThread();  // the hooks never take the GIL
  benchmark::RunSpecifiedBenchmarks();
  PyEval_RestoreThread(python);
  benchmark::Shutdown();
  return 0;
}
