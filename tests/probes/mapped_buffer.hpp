// MappedBuffer: anonymous memory that is resident from the moment it exists and returned to
// the kernel the moment it dies. Tests use it instead of new/malloc so allocator caching (and
// sanitizer allocators) cannot blur the RSS numbers they check.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <stdexcept>

namespace memscope::testing {

class MappedBuffer {
 public:
  explicit MappedBuffer(std::size_t bytes) : size_(bytes) {
    // MAP_POPULATE makes the kernel fault in (and zero) every page now, without our code
    // touching them, so sanitizer shadow memory is not charged to the measurement either.
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap failed");
    data_ = p;
  }
  MappedBuffer(const MappedBuffer&) = delete;
  MappedBuffer& operator=(const MappedBuffer&) = delete;
  ~MappedBuffer() { release(); }

  void release() noexcept {
    if (data_ != nullptr) munmap(data_, size_);
    data_ = nullptr;
  }

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace memscope::testing
