#include "registry.hpp"

#include <pthread.h>

#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <utility>

namespace memscope::python {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<CachingAllocator>> by_spec;  // given and canonical specs
  std::vector<std::string> canonical;
  std::set<std::pair<const CachingAllocator*, std::uintptr_t>> buffer_addresses;
  // Lock-free fast path for the PyTorch hooks, filled once per device.
  std::array<std::atomic<CachingAllocator*>, 64> cuda{};
};

// fork(): default_allocator() builds allocators with the GIL released and this lock held, so
// another thread may hold it when one forks; a child would then wait for it forever. The lock
// is taken before the fork and released after it in both processes. Registered when the
// registry is first used, after the library's own allocator handlers, so pthread_atfork runs
// this prepare handler first: the lock order (docs/design.md) puts this lock above the
// allocators' (it is held while an allocator is constructed).
Registry& registry() {
  static auto* r = [] {
    auto* made = new Registry;  // leaked on purpose: see the header
    ::pthread_atfork([] { registry().mutex.lock(); }, [] { registry().mutex.unlock(); },
                     [] { registry().mutex.unlock(); });
    return made;
  }();
  return *r;
}

}  // namespace

std::shared_ptr<CachingAllocator> default_allocator(const std::string& spec) {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  if (auto it = r.by_spec.find(spec); it != r.by_spec.end()) return it->second;
  // Parsing alone tells another spelling of a backend we have ("sim:24 GiB", "cuda"), so no
  // second backend (for CUDA, a driver context) is built just to learn its name.
  const BackendSpec parsed = BackendSpec::parse(spec);
  const std::string name = parsed.to_string();
  if (auto it = r.by_spec.find(name); it != r.by_spec.end()) {
    r.by_spec.emplace(spec, it->second);
    return it->second;
  }
  auto allocator =
      std::make_shared<CachingAllocator>(make_backend(parsed), AllocatorConfig::from_env());
  r.by_spec.emplace(name, allocator);
  r.by_spec.emplace(spec, allocator);
  r.canonical.push_back(name);
  return allocator;
}

CachingAllocator* default_cuda_allocator(int device) {
  Registry& r = registry();
  const bool cacheable = device >= 0 && static_cast<std::size_t>(device) < r.cuda.size();
  if (cacheable) {
    if (CachingAllocator* a =
            r.cuda[static_cast<std::size_t>(device)].load(std::memory_order_acquire))
      return a;
  }
  const BackendSpec spec{.type = BackendSpec::Type::cuda, .device_index = device};
  CachingAllocator* a = default_allocator(spec.to_string()).get();
  if (cacheable) r.cuda[static_cast<std::size_t>(device)].store(a, std::memory_order_release);
  return a;
}

std::vector<std::string> default_allocator_specs() {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  return r.canonical;
}

void claim_buffer_address(const CachingAllocator* allocator, std::uintptr_t address) {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  r.buffer_addresses.emplace(allocator, address);
}

void release_buffer_address(const CachingAllocator* allocator, std::uintptr_t address) noexcept {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  r.buffer_addresses.erase({allocator, address});
}

bool is_buffer_address(const CachingAllocator* allocator, std::uintptr_t address) {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  return r.buffer_addresses.contains({allocator, address});
}

const char* kind_name(MemoryKind kind) noexcept {
  switch (kind) {
    case MemoryKind::host:
      return "host";
    case MemoryKind::device:
      return "device";
    case MemoryKind::simulated:
      return "simulated";
  }
  return "host";
}

}  // namespace memscope::python
