// Peer allocators the benchmarks compare memscope with: glibc malloc, jemalloc and mimalloc.
//
// glibc must stay the process's malloc, or the "glibc" figures would measure someone else.
// Debian's libjemalloc.so.2 and libmimalloc.so.2 both export malloc/free, so linking either one
// would replace malloc for the whole process. mimalloc is therefore loaded with
// dlopen(RTLD_LOCAL), which keeps its symbols out of the global scope, and mi_malloc/mi_free
// are called through the pointers dlsym() returns from its own handle. jemalloc cannot be
// loaded that way here: Debian builds it with initial-exec TLS, and dlopen fails with "cannot
// allocate memory in static TLS block". It runs in its own binary, memscope_bench_jemalloc,
// which links it as the process malloc; load_peer("jemalloc") uses it when it is the process
// malloc, tries dlopen otherwise, and says where to look when both fail.
// Every peer, glibc included, is called through a function pointer, so the indirect-call cost
// is the same for all of them.
//
// Thread safety: load_peer() may be called from any thread; the returned functions are the
// allocators' own, which are thread-safe. Libraries stay loaded until the process exits.
#pragma once

#include <dlfcn.h>

#include <cstddef>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

namespace memscope::bench {

struct PeerAllocator {
  std::string_view name;
  void* (*allocate)(std::size_t) = nullptr;
  void (*deallocate)(void*) = nullptr;
};

inline constexpr std::string_view kPeerNames[] = {"glibc", "jemalloc", "mimalloc"};

namespace detail {

inline std::optional<PeerAllocator> load_from_library(std::string_view name, const char* library,
                                                      const char* alloc_symbol,
                                                      const char* free_symbol, std::string* why) {
  void* handle = ::dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    if (why != nullptr) *why = std::string("dlopen ") + library + ": " + ::dlerror();
    return std::nullopt;
  }
  void* alloc = ::dlsym(handle, alloc_symbol);
  void* dealloc = ::dlsym(handle, free_symbol);
  if (alloc == nullptr || dealloc == nullptr) {
    if (why != nullptr) *why = std::string(library) + " lacks " + alloc_symbol + "/" + free_symbol;
    return std::nullopt;
  }
  // dlsym returns object pointers; POSIX guarantees the conversion to function pointers.
  return PeerAllocator{name, reinterpret_cast<void* (*)(std::size_t)>(alloc),
                       reinterpret_cast<void (*)(void*)>(dealloc)};
}

}  // namespace detail

// Whether jemalloc is the process malloc (it alone defines mallctl).
inline bool jemalloc_is_process_malloc() {
  return ::dlsym(RTLD_DEFAULT, "mallctl") != nullptr;
}

// The process malloc, through lambdas (taking &std::malloc is unspecified).
inline PeerAllocator process_malloc(std::string_view name) {
  return PeerAllocator{name, [](std::size_t n) { return std::malloc(n); },
                       [](void* p) { std::free(p); }};
}

// The peer called `name` (one of kPeerNames), or nullopt with the reason in *why.
inline std::optional<PeerAllocator> load_peer(std::string_view name, std::string* why) {
  if (name == "glibc") {
    if (jemalloc_is_process_malloc()) {
      if (why != nullptr) *why = "the process malloc is jemalloc here, not glibc";
      return std::nullopt;
    }
    return process_malloc(name);
  }
  if (name == "jemalloc") {
    if (jemalloc_is_process_malloc()) return process_malloc(name);
    auto peer = detail::load_from_library(name, "libjemalloc.so.2", "malloc", "free", why);
    if (!peer && why != nullptr) *why += " (memscope_bench_jemalloc runs the jemalloc figures)";
    return peer;
  }
  if (name == "mimalloc") {
    return detail::load_from_library(name, "libmimalloc.so.2", "mi_malloc", "mi_free", why);
  }
  if (why != nullptr) *why = "unknown peer allocator";
  return std::nullopt;
}

}  // namespace memscope::bench
