// The allocator's checks of the expandable-segment settings against its backend: a page size
// below the backend's granularity, or a backend that cannot map pages, is a ConfigError naming
// the key; the page size set is the step reserved memory grows by (large pool only).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "expandable_checks.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/errors.hpp"
#include "memscope/host_backend.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

constexpr auto kSmall = static_cast<std::size_t>(StatPool::small);
constexpr auto kLarge = static_cast<std::size_t>(StatPool::large);

// A backend that reserves whole segments but keeps the Backend base class's page mapping
// (granularity 0): what a third-party backend written before expandable segments looks like.
class SegmentsOnly final : public Backend {
 public:
  [[nodiscard]] std::string name() const override { return "segments-only"; }
  [[nodiscard]] MemoryKind memory_kind() const noexcept override { return MemoryKind::simulated; }
  [[nodiscard]] std::size_t capacity() const override { return inner_.capacity(); }
  [[nodiscard]] std::size_t free_bytes() const override { return inner_.free_bytes(); }
  [[nodiscard]] void* reserve(std::size_t bytes) override { return inner_.reserve(bytes); }
  void release(void* base, std::size_t bytes) noexcept override { inner_.release(base, bytes); }
  [[nodiscard]] EventId create_event() override { return inner_.create_event(); }
  void destroy_event(EventId event) noexcept override { inner_.destroy_event(event); }
  void record_event(EventId event, StreamId stream) override { inner_.record_event(event, stream); }
  [[nodiscard]] bool query_event(EventId event) override { return inner_.query_event(event); }
  void synchronize_event(EventId event) override { inner_.synchronize_event(event); }

 private:
  SimulatedBackend inner_{1 * GiB};
};

TEST(ExpandableConfig, ABackendThatCannotMapPagesIsAConfigErrorNamingTheKey) {
  auto backend = std::make_shared<SegmentsOnly>();
  ASSERT_EQ(backend->page_granularity(), 0U);
  try {
    CachingAllocator allocator(backend, AllocatorConfig::parse("expandable_segments:true"));
    FAIL() << "expandable segments were accepted on a backend that cannot map pages";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "expandable_segments");
    EXPECT_NE(std::string(e.what()).find("expandable_segments"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("segments-only"), std::string::npos)
        << "the message should name the backend: " << e.what();
  }
  // Without the setting the same backend serves as before.
  CachingAllocator plain(backend, AllocatorConfig{});
  void* p = plain.allocate(3 * MiB);
  EXPECT_NE(p, nullptr);
  plain.deallocate(p);
}

TEST(ExpandableConfig, APageSizeBelowTheBackendsGranularityIsAConfigErrorNamingTheKey) {
  auto device = std::make_shared<SimulatedBackend>(1 * GiB);
  ASSERT_EQ(device->page_granularity(), 2 * MiB);
  try {
    CachingAllocator allocator(
        device,
        AllocatorConfig::parse("expandable_segments:true,expandable_segments_page_size:1MiB"));
    FAIL() << "a 1 MiB page was accepted on a backend whose granularity is 2 MiB";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "expandable_segments_page_size");
    EXPECT_NE(std::string(e.what()).find("expandable_segments_page_size"), std::string::npos)
        << e.what();
    const std::string what = e.what();
    EXPECT_TRUE(what.find("2MiB") != std::string::npos || what.find("2 MiB") != std::string::npos ||
                what.find("2097152") != std::string::npos)
        << "the message should name the granularity: " << what;
  }
}

TEST(ExpandableConfig, TheLargePoolGrowsByThePageSizeSetAndTheSmallPoolBy2MiB) {
  auto device = std::make_shared<SimulatedBackend>(1 * GiB);
  CachingAllocator allocator(
      device,
      AllocatorConfig::parse("expandable_segments:true,expandable_segments_page_size:8MiB"));
  void* a = allocator.allocate(3 * MiB);
  void* b = allocator.allocate(1000);
  MemoryStats s = allocator.stats();
  EXPECT_EQ(s.reserved_bytes[kLarge].current, static_cast<std::int64_t>(8 * MiB));
  EXPECT_EQ(s.reserved_bytes[kSmall].current, static_cast<std::int64_t>(2 * MiB));
  void* c = allocator.allocate(6 * MiB);  // 3 + 6 MiB: a second 8 MiB page
  s = allocator.stats();
  EXPECT_EQ(s.reserved_bytes[kLarge].current, static_cast<std::int64_t>(16 * MiB));
  EXPECT_TRUE(testing::expandable_consistent(allocator));
  for (void* p : {a, b, c}) allocator.deallocate(p);
}

TEST(ExpandableConfig, HostPagesAsSmallAsTheOsPageMapOnlyWhatIsAskedFor) {
  auto host = std::make_shared<HostBackend>();
  const std::size_t os_page = host->page_granularity();
  ASSERT_GT(os_page, 0U);
  CachingAllocator allocator(
      host, AllocatorConfig::parse("expandable_segments:true,expandable_segments_page_size:" +
                                   std::to_string(os_page)));
  void* a = allocator.allocate(3 * MiB + 100);  // rounded to 512 B, mapped in OS pages
  const auto reserved = static_cast<std::size_t>(allocator.stats().reserved_bytes[kLarge].current);
  EXPECT_EQ(reserved, (3 * MiB + 512 + os_page - 1) / os_page * os_page);
  static_cast<unsigned char*>(a)[3 * MiB + 99] = 1;  // the last requested byte is mapped
  EXPECT_TRUE(testing::expandable_consistent(allocator));
  allocator.deallocate(a);
}

// A stream's address range is reserved when first needed; a memory limit raised afterwards
// (set_memory_limit: Python's set_per_process_memory_fraction, PyTorch's hook) must still let the
// stream grow up to the new limit. Regression: the range was sized by the limit at the time, so
// the 3 GiB request below failed with OutOfMemoryError on a device with 63.5 GiB free; now the
// pool grows on in a second range.
TEST(ExpandableConfig, AMemoryLimitRaisedAfterTheRangeWasReservedStillLetsTheStreamGrow) {
  // Under every policy: above_peak and always place by address space, where the free run at
  // the end of the full range is too small for the request (taken as the open end of the
  // range, it was once walked past the range's last block: a crash).
  for (const char* policy : {"never", "at_limit", "above_peak", "always"}) {
    SCOPED_TRACE(policy);
    auto device = std::make_shared<SimulatedBackend>(64 * GiB);
    CachingAllocator allocator(
        device, AllocatorConfig::parse(std::string("memory_limit:1GiB,expandable_segments:true,"
                                                   "expandable_segments_recycling:") +
                                       policy));
    void* a = allocator.allocate(512 * MiB);  // reserves the default stream's large-pool range
    allocator.set_memory_limit(8 * GiB);
    void* b = nullptr;
    EXPECT_NO_THROW(b = allocator.allocate(3 * GiB));
    EXPECT_EQ(allocator.stats().reserved_bytes[kLarge].current,
              static_cast<std::int64_t>(3 * GiB + 512 * MiB));
    EXPECT_TRUE(testing::expandable_consistent(allocator));
    allocator.deallocate(b);
    allocator.deallocate(a);
  }
}

}  // namespace
}  // namespace memscope
