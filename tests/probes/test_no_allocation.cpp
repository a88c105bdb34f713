// The read path allocates nothing: this binary replaces the global operator new with a
// counting one, and the probe's reads must leave the count unchanged. (A probe that allocated
// while measuring an allocator would perturb what it measures, and could deadlock inside a
// malloc hook.)
#include <atomic>
#include <cstdlib>
#include <new>

#include <gtest/gtest.h>

#include "memscope/host_probe.hpp"

namespace {
std::atomic<long> g_news{0};
}

// noinline: once GCC 12 inlines these at -O2 it flags free() on "memory from operator new",
// not seeing that this operator new is a malloc.
[[gnu::noinline]] void* operator new(std::size_t size) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept {
  std::free(p);
}
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace memscope {
namespace {

TEST(ProbeReadPath, AllocatesNothing) {
  for (bool sampling : {false, true}) {
    HostProbe probe(HostProbeOptions{.force_sampling = sampling});
    HostProbe::Window w = probe.open_window();
    std::int64_t sink = 0;
    const long before = g_news.load();
    for (int i = 0; i < 100; ++i) {
      HostMemory m = probe.read();
      sink += m.rss + probe.current_rss() + w.read().peak;
    }
    const long after = g_news.load();
    EXPECT_EQ(after - before, 0) << probe.mode_name();
    EXPECT_GT(sink, 0);
  }
}

}  // namespace
}  // namespace memscope
