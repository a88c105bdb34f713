#include "memscope/host_backend.hpp"

#include <fmt/format.h>
#include <sys/mman.h>

#include <cerrno>
#include <system_error>

#include "common/system_memory.hpp"
#include "memscope/errors.hpp"

namespace memscope {

std::size_t HostBackend::capacity() const {
  return detail::read_system_memory().total;
}

std::size_t HostBackend::free_bytes() const {
  return detail::read_system_memory().available;
}

void* HostBackend::reserve(std::size_t bytes) {
  // Refuse what the machine cannot back instead of letting the OOM killer decide later:
  // device memory fails the same way, and the allocator then flushes its cache and retries.
  if (bytes > free_bytes()) return nullptr;
  // MAP_POPULATE faults every page in now, so a reserved byte is resident, as on a device.
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    if (err == ENOMEM) return nullptr;
    throw BackendError(fmt::format("host backend: mmap of {} bytes failed: {}", bytes,
                                   std::system_category().message(err)));
  }
  return p;
}

void HostBackend::release(void* base, std::size_t bytes) noexcept {
  // munmap only fails for arguments we never pass (a range we did not map).
  (void)::munmap(base, bytes);
}

}  // namespace memscope
