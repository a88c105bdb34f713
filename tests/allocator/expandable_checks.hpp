// What every state of an allocator with expandable_segments:true must satisfy, as a user of the
// public API sees it, plus the kernel's own memory figures for the host-backend tests.
//
// The allocator's validate() checks its bookkeeping; on top of that, with expandable segments:
// the snapshot's totals equal the live statistics (current values, every family and pool),
// peaks are never below current, every snapshot segment is one contiguous mapped range
// (is_expandable, blocks tiling it exactly, never adjacent to another range of the same stream
// and pool: two adjacent mapped ranges would be one), and the device's own count of mapped
// bytes, where the test has one, equals reserved_bytes.
// Resident memory is read two ways: VmRSS (what users and the brief quote) and the exact page
// table walk of smaps_rollup.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "allocator_invariants.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/snapshot.hpp"
#include "memscope/stats.hpp"

namespace memscope::testing {

// Every expandable_segments_recycling policy, for INSTANTIATE_TEST_SUITE_P(..., kRecyclingPolicies,
// policy_name): a test runs under each, named by it.
inline const auto kRecyclingPolicies =
    ::testing::Values("never", "at_limit", "above_peak", "always");
inline std::string policy_name(const ::testing::TestParamInfo<const char*>& info) {
  return info.param;
}

// The families Snapshot::totals() rebuilds and the live statistics' current values agree on.
inline ::testing::AssertionResult totals_match(const Snapshot& snap, const MemoryStats& live) {
  const MemoryStats rebuilt = snap.totals();
  for (const StatFamily& family : kStatFamilies) {
    for (std::size_t pool = 0; pool < kStatPools; ++pool) {
      const std::int64_t from_blocks = (rebuilt.*family.member)[pool].current;
      const std::int64_t now = (live.*family.member)[pool].current;
      if (from_blocks != now) {
        return ::testing::AssertionFailure()
               << family.name << "." << kStatPoolNames[pool] << ".current is " << now
               << " but the snapshot's blocks make it " << from_blocks;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult peaks_not_below_current(const MemoryStats& s) {
  for (const StatFamily& family : kStatFamilies) {
    for (std::size_t pool = 0; pool < kStatPools; ++pool) {
      const Stat& stat = (s.*family.member)[pool];
      if (stat.peak < stat.current) {
        return ::testing::AssertionFailure()
               << family.name << "." << kStatPoolNames[pool] << ": peak " << stat.peak
               << " < current " << stat.current;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// Every segment is an expandable mapped range that its blocks tile exactly, and no two ranges of
// one stream and pool touch.
inline ::testing::AssertionResult segments_are_mapped_ranges(const Snapshot& snap) {
  const SegmentInfo* previous = nullptr;
  for (const SegmentInfo& s : snap.segments) {
    if (!s.is_expandable) {
      return ::testing::AssertionFailure()
             << "segment at " << s.address << " is not is_expandable with expandable_segments:true";
    }
    if (s.total_size == 0 || s.blocks.empty()) {
      return ::testing::AssertionFailure() << "segment at " << s.address << " is empty";
    }
    std::uintptr_t next = s.address;
    for (const BlockInfo& b : s.blocks) {
      if (b.address != next || b.size == 0) {
        return ::testing::AssertionFailure()
               << "segment at " << s.address << ": block at " << b.address << " (size " << b.size
               << ") where the previous block ended at " << next;
      }
      next += b.size;
    }
    if (next != s.address + s.total_size) {
      return ::testing::AssertionFailure() << "segment at " << s.address << " of " << s.total_size
                                           << " bytes: its blocks end at " << next - s.address;
    }
    if (previous != nullptr && previous->stream == s.stream &&
        previous->small_pool == s.small_pool &&
        previous->address + previous->total_size == s.address) {
      return ::testing::AssertionFailure()
             << "mapped ranges at " << previous->address << " and " << s.address
             << " touch: one contiguous mapped range must be one segment";
    }
    previous = &s;
  }
  return ::testing::AssertionSuccess();
}

// All of the above, and the allocator's own validate() and the shared snapshot checks.
inline ::testing::AssertionResult expandable_consistent(const CachingAllocator& allocator) {
  ::testing::AssertionResult valid = validated(allocator);
  if (!valid) return valid;
  const MemoryStats live = allocator.stats();
  const Snapshot snap = allocator.snapshot();
  for (auto result : {snapshot_consistent(snap), totals_match(snap, live),
                      peaks_not_below_current(live), segments_are_mapped_ranges(snap)}) {
    if (!result) return result;
  }
  return ::testing::AssertionSuccess();
}

// A field of /proc/self/status in bytes ("VmRSS", "VmSize"); -1 when it cannot be read.
inline std::int64_t proc_status_bytes(const char* field) {
  std::FILE* f = std::fopen("/proc/self/status", "re");
  if (f == nullptr) return -1;
  char line[256];
  std::int64_t kib = -1;
  const std::size_t length = std::strlen(field);
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, field, length) == 0 && line[length] == ':') {
      long long value = 0;
      if (std::sscanf(line + length + 1, "%lld", &value) == 1) kib = value;
      break;
    }
  }
  std::fclose(f);
  return kib < 0 ? -1 : kib * 1024;
}

inline std::int64_t vm_rss() {
  return proc_status_bytes("VmRSS");
}

// The resident bytes the kernel finds walking this process's page tables (/proc/self/smaps_rollup
// "Rss:"): exact, unlike VmRSS, which sums per-CPU counters and may be off by several MiB on a
// machine with many CPUs (detail::rss_counter_slack). -1 when it cannot be read.
inline std::int64_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/smaps_rollup", "re");
  if (f == nullptr) return -1;
  char line[256];
  std::int64_t kib = -1;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    long long value = 0;
    if (std::sscanf(line, "Rss: %lld kB", &value) == 1) {
      kib = value;
      break;
    }
  }
  std::fclose(f);
  return kib < 0 ? -1 : kib * 1024;
}

// The snapshot's block that starts at `address`, or nullptr.
inline const BlockInfo* block_at(const Snapshot& snap, std::uintptr_t address) {
  for (const SegmentInfo& s : snap.segments) {
    for (const BlockInfo& b : s.blocks) {
      if (b.address == address) return &b;
    }
  }
  return nullptr;
}

// Whether some snapshot segment (a mapped range) covers [address, address + bytes).
inline bool mapped(const Snapshot& snap, std::uintptr_t address, std::size_t bytes) {
  for (const SegmentInfo& s : snap.segments) {
    if (s.address <= address && address + bytes <= s.address + s.total_size) return true;
  }
  return false;
}

}  // namespace memscope::testing
