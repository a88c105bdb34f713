// A program for test_marks.py to run under `memscope run`: MemoryTracker stages that write
// stage marks, nested and in a known order, with known amounts of memory touched in them.
//
//   marks_child [MIB]   "load" touches MIB MiB (default 32) and keeps it; "train" holds two
//                       "step" stages (each touches 2*MIB MiB and frees it), then "eval"
//                       (touches MIB MiB and frees it).
// It prints "stage <name>" as each stage ends.
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "memscope/tracker.hpp"

namespace {

// `mib` MiB straight from the kernel, every page written, so they count in RSS; returned to the
// kernel when the handle goes (malloc, or a sanitizer's quarantine, could keep freed memory
// resident and hide the stage's peak).
class Touched {
 public:
  explicit Touched(std::size_t mib) : bytes_(mib << 20) {
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      std::perror("marks_child: mmap");
      std::exit(2);
    }
    block_ = static_cast<char*>(p);
    for (std::size_t i = 0; i < bytes_; i += 4096) block_[i] = 1;
  }
  Touched(const Touched&) = delete;
  Touched& operator=(const Touched&) = delete;
  ~Touched() { ::munmap(block_, bytes_); }

 private:
  std::size_t bytes_;
  char* block_ = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  const std::size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 32;
  memscope::MemoryTracker tracker;  // the implicit "init" stage begins here
  std::unique_ptr<Touched> kept;
  {
    auto load = tracker.stage("load");
    kept = std::make_unique<Touched>(mib);
    std::puts("stage load");
  }
  {
    auto train = tracker.stage("train");
    for (int i = 0; i < 2; ++i) {
      auto step = tracker.stage("step");
      const Touched scratch(2 * mib);
      std::puts("stage step");
    }
    {
      auto eval = tracker.stage("eval");
      const Touched scratch(mib);
      std::puts("stage eval");
    }
    std::puts("stage train");
  }
  return 0;
}
