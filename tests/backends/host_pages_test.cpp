// HostBackend's page mapping against the kernel's own numbers: VmRSS in /proc/self/status for
// what is resident, /proc/self/maps for what is mapped and with which protection.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backends/host_pages.hpp"
#include "memscope/errors.hpp"
#include "memscope/host_backend.hpp"
#include "memscope/units.hpp"
#include "probes/proc_files.hpp"
#include "sanitizers.hpp"

namespace memscope {
namespace {

// VmRSS of this process, in bytes.
std::int64_t vm_rss() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  ADD_FAILURE() << "no VmRSS in /proc/self/status";
  return 0;
}

// How far two VmRSS reads may be off the exact change: 1 MiB for what the test itself touches
// (stack, gtest's output), plus twice the kernel's RSS-counter slack (each read may be off).
std::int64_t rss_tolerance() {
  return std::int64_t{1} * static_cast<std::int64_t>(MiB) + 2 * detail::rss_counter_slack(1);
}

// Expects VmRSS to have changed by `expected` bytes since `before` (a vm_rss() reading). Under
// ThreadSanitizer the check is left out: its shadow memory counts in RSS.
void expect_rss_change(std::int64_t before, std::int64_t expected) {
  if (testing::kThreadSanitizer) return;
  EXPECT_NEAR(static_cast<double>(vm_rss() - before), static_cast<double>(expected),
              static_cast<double>(rss_tolerance()));
}

// The permissions ("rw-p", "---p") of the mapping holding `address` in /proc/self/maps; empty
// when nothing maps it.
std::string perms_at(const void* address) {
  const auto a = reinterpret_cast<std::uintptr_t>(address);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range;
    std::string perms;
    fields >> range >> perms;
    const auto dash = range.find('-');
    const std::uintptr_t begin = std::stoull(range.substr(0, dash), nullptr, 16);
    const std::uintptr_t end = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (begin <= a && a < end) return perms;
  }
  return "";
}

char* at(void* base, std::size_t offset) {
  return static_cast<char*>(base) + offset;
}

bool all_equal(const void* p, std::size_t bytes, unsigned char value) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < bytes; ++i) {
    if (b[i] != value) return false;
  }
  return true;
}

TEST(HostPages, GranularityIsTheOsPage) {
  HostBackend host;
  EXPECT_EQ(host.page_granularity(), static_cast<std::size_t>(sysconf(_SC_PAGESIZE)));
}

TEST(HostPages, ARangeIsAddressSpaceOnly) {
  HostBackend host;
  const std::int64_t before = vm_rss();
  void* r = host.reserve_address_range(1 * GiB);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(perms_at(r), "---p");
  EXPECT_EQ(perms_at(at(r, 1 * GiB - 4096)), "---p");
  expect_rss_change(before, 0);
  host.release_address_range(r, 1 * GiB);
  EXPECT_EQ(perms_at(r), "");
}

TEST(HostPages, ResidentMemoryFollowsMapUnmapAndMove) {
  if (testing::kThreadSanitizer) GTEST_SKIP() << testing::kRssUnderTsan;
  HostBackend host;
  const std::size_t page = 2 * MiB;
  void* r = host.reserve_address_range(128 * MiB);
  ASSERT_NE(r, nullptr);

  // Map 64 MiB: resident at once (populated), read-write.
  std::int64_t before = vm_rss();
  ASSERT_TRUE(host.map_pages(r, 64 * MiB, page));
  expect_rss_change(before, 64 * static_cast<std::int64_t>(MiB));
  EXPECT_EQ(perms_at(r), "rw-p");
  std::memset(r, 0x7e, 64 * MiB);

  // Unmap the upper 32 MiB: freed, and the range is PROT_NONE there again.
  before = vm_rss();
  host.unmap_pages(at(r, 32 * MiB), 32 * MiB, page, kDefaultStream);
  expect_rss_change(before, -32 * static_cast<std::int64_t>(MiB));
  EXPECT_EQ(perms_at(at(r, 32 * MiB)), "---p");
  EXPECT_EQ(perms_at(at(r, 32 * MiB - 4096)), "rw-p");

  // Move 16 MiB up to offset 96 MiB: the written bytes arrive, nothing is copied or freed.
  std::memset(at(r, 16 * MiB), 0x3c, 16 * MiB);
  before = vm_rss();
  ASSERT_TRUE(host.move_pages(at(r, 16 * MiB), at(r, 96 * MiB), 16 * MiB, page, kDefaultStream))
      << "MREMAP_DONTUNMAP is missing on this kernel";
  expect_rss_change(before, 0);
  EXPECT_TRUE(all_equal(at(r, 96 * MiB), 16 * MiB, 0x3c));
  EXPECT_EQ(perms_at(at(r, 96 * MiB)), "rw-p");
  EXPECT_EQ(perms_at(at(r, 16 * MiB)), "---p");
  EXPECT_EQ(perms_at(at(r, 32 * MiB - 4096)), "---p");
  EXPECT_TRUE(all_equal(r, 16 * MiB, 0x7e));  // the pages below are untouched

  before = vm_rss();
  host.unmap_pages(r, 16 * MiB, page, kDefaultStream);
  host.unmap_pages(at(r, 96 * MiB), 16 * MiB, page, kDefaultStream);
  expect_rss_change(before, -32 * static_cast<std::int64_t>(MiB));
  host.release_address_range(r, 128 * MiB);
}

TEST(HostPages, MovesARangeTheKernelKeepsAsSeveralMappings) {
  // Pages mapped in separate calls and moved in are separate mappings the kernel may not merge;
  // mremap refuses such a source (EFAULT) and the backend moves page by page.
  HostBackend host;
  const std::size_t page = 2 * MiB;
  void* r = host.reserve_address_range(16 * page);
  ASSERT_NE(r, nullptr);
  ASSERT_TRUE(host.map_pages(r, page, page));
  ASSERT_TRUE(host.map_pages(at(r, 4 * page), page, page));
  std::memset(r, 0x01, page);
  std::memset(at(r, 4 * page), 0x02, page);
  ASSERT_TRUE(host.move_pages(at(r, 4 * page), at(r, page), page, page, kDefaultStream));
  ASSERT_TRUE(host.map_pages(at(r, 2 * page), page, page));
  std::memset(at(r, 2 * page), 0x03, page);
  const std::int64_t before = vm_rss();
  ASSERT_TRUE(host.move_pages(r, at(r, 8 * page), 3 * page, page, kDefaultStream));
  expect_rss_change(before, 0);
  EXPECT_TRUE(all_equal(at(r, 8 * page), page, 0x01));
  EXPECT_TRUE(all_equal(at(r, 9 * page), page, 0x02));
  EXPECT_TRUE(all_equal(at(r, 10 * page), page, 0x03));
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(perms_at(at(r, i * page)), "---p") << i;
  host.unmap_pages(at(r, 8 * page), 3 * page, page, kDefaultStream);
  host.release_address_range(r, 16 * page);
}

TEST(HostPages, AMapBeyondMemAvailableIsRefused) {
  HostBackend host;
  const std::size_t page = 2 * MiB;
  const std::size_t bytes = (host.free_bytes() / page + 1) * page;
  void* r = host.reserve_address_range(bytes);
  ASSERT_NE(r, nullptr);
  const std::int64_t before = vm_rss();
  EXPECT_FALSE(host.map_pages(r, bytes, page));
  expect_rss_change(before, 0);
  EXPECT_EQ(perms_at(r), "---p");  // still reserved
  host.release_address_range(r, bytes);
}

TEST(HostPages, BadArgumentsAreTypedErrorsNamingThem) {
  HostBackend host;
  void* r = host.reserve_address_range(4 * MiB);
  ASSERT_NE(r, nullptr);
  try {
    (void)host.map_pages(at(r, 1), 2 * MiB, 2 * MiB);
    ADD_FAILURE() << "a misaligned address was accepted";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("map_pages"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("aligned"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)host.map_pages(r, 3 * MiB, 2 * MiB), BackendError);  // not whole pages
  EXPECT_THROW((void)host.reserve_address_range(100), BackendError);
  EXPECT_THROW((void)host.move_pages(r, at(r, 1 * MiB), 2 * MiB, 1 * MiB, kDefaultStream),
               BackendError);  // overlapping
  host.release_address_range(r, 4 * MiB);
}

// Random maps, unmaps and moves over a range of page slots against a model of which slot holds
// which bytes; /proc/self/maps and the memory itself must agree with the model throughout, and
// the RSS freed by releasing the range with the model's mapped total at the end.
TEST(HostPages, RandomMapUnmapMoveAgreesWithTheKernel) {
  HostBackend host;
  const std::size_t page = 1 * MiB;  // the mapped total is then well above the RSS tolerance
  constexpr std::size_t kSlots = 64;
  void* r = host.reserve_address_range(kSlots * page);
  ASSERT_NE(r, nullptr);
  std::vector<int> model(kSlots, -1);  // -1: unmapped; else the byte the slot is filled with
  std::mt19937 random(12);             // fixed seed: the same sequence every run
  int next_value = 0;
  auto run_free = [&](std::size_t first, std::size_t n, bool mapped) {
    for (std::size_t i = first; i < first + n; ++i) {
      if ((model[i] >= 0) != mapped) return false;
    }
    return true;
  };
  for (int step = 0; step < 600; ++step) {
    const std::size_t n = 1 + random() % 4;
    const std::size_t first = random() % (kSlots - n + 1);
    switch (random() % 3) {
      case 0:
        if (!run_free(first, n, false)) break;
        ASSERT_TRUE(host.map_pages(at(r, first * page), n * page, page)) << step;
        for (std::size_t i = first; i < first + n; ++i) {
          model[i] = next_value;
          std::memset(at(r, i * page), next_value, page);
          next_value = (next_value + 1) % 251;
        }
        break;
      case 1:
        if (!run_free(first, n, true)) break;
        host.unmap_pages(at(r, first * page), n * page, page, kDefaultStream);
        for (std::size_t i = first; i < first + n; ++i) model[i] = -1;
        break;
      default: {
        const std::size_t to = random() % (kSlots - n + 1);
        if (!run_free(first, n, true) || !run_free(to, n, false)) break;
        ASSERT_TRUE(
            host.move_pages(at(r, first * page), at(r, to * page), n * page, page, kDefaultStream))
            << step;
        std::vector<int> moved(model.begin() + static_cast<std::ptrdiff_t>(first),
                               model.begin() + static_cast<std::ptrdiff_t>(first + n));
        for (std::size_t i = 0; i < n; ++i) model[first + i] = -1;
        for (std::size_t i = 0; i < n; ++i) model[to + i] = moved[i];
        break;
      }
    }
    if (step % 50 != 49) continue;
    for (std::size_t i = 0; i < kSlots; ++i) {
      const void* slot = at(r, i * page);
      ASSERT_EQ(perms_at(slot), model[i] >= 0 ? "rw-p" : "---p")
          << "step " << step << " slot " << i;
      if (model[i] >= 0) {
        ASSERT_TRUE(all_equal(slot, page, static_cast<unsigned char>(model[i])))
            << "step " << step << " slot " << i;
      }
    }
  }
  std::int64_t mapped = 0;
  for (const int v : model) mapped += v >= 0 ? static_cast<std::int64_t>(page) : 0;
  // Releasing the range frees exactly what the model says is mapped in it. (Measured across
  // the release alone: the test's own heap use, and ASan's quarantine of it, move RSS too.)
  const std::int64_t before_release = vm_rss();
  host.release_address_range(r, kSlots * page);
  expect_rss_change(before_release, -mapped);
}

// The path kernels before 6.17 take (mremap refuses a source made of several mappings): moving
// in pieces, and OS page by OS page inside a piece that spans mappings, keeps every byte.
TEST(HostPages, MovingInPiecesKeepsEveryByte) {
  HostBackend host;
  const std::size_t page = 2 * MiB;
  void* r = host.reserve_address_range(16 * page);
  ASSERT_NE(r, nullptr);
  // Three mappings: [0, 1) and [2, 4) mapped in place, [1, 2) moved in from [4, 5).
  ASSERT_TRUE(host.map_pages(r, page, page));
  ASSERT_TRUE(host.map_pages(at(r, 4 * page), page, page));
  ASSERT_TRUE(host.move_pages(at(r, 4 * page), at(r, page), page, page, kDefaultStream));
  ASSERT_TRUE(host.map_pages(at(r, 2 * page), 2 * page, page));
  for (std::size_t i = 0; i < 4; ++i) {
    std::memset(at(r, i * page), static_cast<int>(0x41 + i), page);
  }
  const std::int64_t before = vm_rss();
  bool moved = false;
  // Pieces of two pages: the first spans two mappings, which kernels before 6.17 refuse, so
  // it moves OS page by OS page there; the second is one mapping.
  ASSERT_EQ(detail::host_move_in_pieces(r, at(r, 8 * page), 4 * page, 2 * page, moved), 0);
  EXPECT_TRUE(moved);
  expect_rss_change(before, 0);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(all_equal(at(r, (8 + i) * page), page, static_cast<unsigned char>(0x41 + i))) << i;
    EXPECT_EQ(perms_at(at(r, i * page)), "---p") << i;
  }
  host.unmap_pages(at(r, 8 * page), 4 * page, page, kDefaultStream);
  host.release_address_range(r, 16 * page);
}

// Several allocators may share one backend: threads mapping, moving and unmapping pages in
// their own ranges at once each find their own bytes where they left them.
TEST(HostPages, ConcurrentCallersKeepTheirOwnBytes) {
  constexpr std::size_t kThreads = 4;
  constexpr std::size_t kSlots = 16;
  const std::size_t page = 256 * KiB;
  HostBackend host;
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      void* r = host.reserve_address_range(kSlots * page);
      std::vector<int> model(kSlots, -1);
      std::mt19937 random(static_cast<unsigned>(7 + t));
      for (int step = 0; step < 400; ++step) {
        const std::size_t i = random() % kSlots;
        const std::size_t j = random() % kSlots;
        if (model[i] < 0) {
          if (!host.map_pages(at(r, i * page), page, page)) ++failures[t];
          model[i] = static_cast<int>((t * 64 + static_cast<std::size_t>(step)) % 251);
          std::memset(at(r, i * page), model[i], page);
        } else if (model[j] < 0) {
          if (!host.move_pages(at(r, i * page), at(r, j * page), page, page, kDefaultStream)) {
            ++failures[t];
          }
          model[j] = model[i];
          model[i] = -1;
        } else {
          host.unmap_pages(at(r, i * page), page, page, kDefaultStream);
          model[i] = -1;
        }
        if (step % 20 != 19) continue;
        for (std::size_t k = 0; k < kSlots; ++k) {
          if (model[k] >= 0 &&
              !all_equal(at(r, k * page), page, static_cast<unsigned char>(model[k]))) {
            ++failures[t];
          }
        }
      }
      host.release_address_range(r, kSlots * page);
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (std::size_t t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace memscope
