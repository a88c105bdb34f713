// A program for test_marks.py to run under `memscope run`: MemoryTracker stages that write
// stage marks, nested and in a known order, with known amounts of memory touched in them.
//
//   marks_child [MIB]   "load" touches MIB MiB (default 32) and keeps it; "train" holds two
//                       "step" stages (each touches 2*MIB MiB and frees it) and "eval" inside
//                       the second step's parent, after both steps.
// It prints one line per stage it ran, "stage <name>", so a test can tell it ran without marks.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "memscope/tracker.hpp"

namespace {

// `mib` MiB, every page written, so they count in RSS.
std::unique_ptr<char[]> touch(std::size_t mib) {
  const std::size_t bytes = mib << 20;
  auto block = std::make_unique<char[]>(bytes);
  for (std::size_t i = 0; i < bytes; i += 4096) block[i] = static_cast<char>(i >> 12);
  return block;
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 32;
  memscope::MemoryTracker tracker;  // the implicit "init" stage begins here
  std::unique_ptr<char[]> kept;
  {
    auto load = tracker.stage("load");
    kept = touch(mib);
    std::puts("stage load");
  }
  {
    auto train = tracker.stage("train");
    for (int i = 0; i < 2; ++i) {
      auto step = tracker.stage("step");
      auto scratch = touch(2 * mib);
      std::puts("stage step");
    }
    {
      auto eval = tracker.stage("eval");
      auto scratch = touch(mib);
      std::puts("stage eval");
    }
    std::puts("stage train");
  }
  return kept[0] == 0 ? 0 : 1;
}
