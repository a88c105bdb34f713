// Recycler<T>: keeps freed Blocks and Segments for reuse, so splitting and merging on the hot
// path do not call the system allocator. Not synchronised.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace memscope::detail {

template <class T>
class Recycler {
 public:
  Recycler() = default;
  Recycler(const Recycler&) = delete;
  Recycler& operator=(const Recycler&) = delete;
  ~Recycler() {
    for (T* p : spare_) delete p;
  }

  // Makes sure the next `count` acquire() calls cannot fail.
  void prepare(std::size_t count) {
    while (spare_.size() < count) spare_.push_back(new T());
  }

  // A default-initialised T (fields reset, buffers of reused objects kept).
  [[nodiscard]] T* acquire() {
    if (spare_.empty()) return new T();
    T* p = spare_.back();
    spare_.pop_back();
    return p;
  }
  // Frees the spares beyond `keep`.
  void trim(std::size_t keep) noexcept {
    while (spare_.size() > keep) {
      delete spare_.back();
      spare_.pop_back();
    }
    try {
      spare_.shrink_to_fit();
    } catch (...) {  // keeping the capacity is fine
    }
  }
  void recycle(T* p) noexcept {
    p->reset();
    try {
      spare_.push_back(p);
    } catch (...) {
      delete p;  // out of memory while growing the spare list: just free the object
    }
  }

 private:
  std::vector<T*> spare_;
};

}  // namespace memscope::detail
