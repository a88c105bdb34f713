// The simulated device: exact capacity, addresses without memory, held streams.
#include <gtest/gtest.h>

#include "memscope/backend.hpp"
#include "memscope/errors.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

TEST(SimulatedBackend, FailsExactlyAtCapacity) {
  SimulatedBackend device(10 * MiB);
  void* a = device.reserve(6 * MiB);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(device.reserve(4 * MiB + 1), nullptr);
  void* b = device.reserve(4 * MiB);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(device.free_bytes(), 0U);
  device.release(a, 6 * MiB);
  EXPECT_EQ(device.free_bytes(), 6 * MiB);
  EXPECT_EQ(device.reserved_bytes(), 4 * MiB);
  device.release(b, 4 * MiB);
}

TEST(SimulatedBackend, AddressesAreNeverReused) {
  SimulatedBackend device(10 * MiB);
  void* a = device.reserve(2 * MiB);
  device.release(a, 2 * MiB);
  void* b = device.reserve(2 * MiB);
  EXPECT_NE(a, b);
  device.release(b, 2 * MiB);
}

TEST(SimulatedBackend, HeldStreamKeepsEventsPendingUntilComplete) {
  SimulatedBackend device(1 * GiB);
  const EventId e = device.create_event();
  const EventId f = device.create_event();
  device.hold(4);
  device.record_event(e, 4);
  device.record_event(f, 5);
  EXPECT_FALSE(device.query_event(e));
  EXPECT_TRUE(device.query_event(f));
  EXPECT_EQ(device.pending_events(), 1U);
  device.complete(4);
  EXPECT_TRUE(device.query_event(e));
  device.hold(4);
  device.record_event(e, 4);
  device.synchronize_event(e);  // waiting is the device finishing the work
  EXPECT_TRUE(device.query_event(e));
  device.destroy_event(e);
  device.destroy_event(f);
}

TEST(BackendFactory, BuildsFromSpecs) {
  EXPECT_EQ(make_backend("sim:24GiB")->capacity(), 24 * GiB);
  EXPECT_EQ(make_backend("sim:24GiB")->name(), "sim:24GiB");
  EXPECT_EQ(make_backend("sim:1536MiB")->name(), "sim:1536MiB");
  EXPECT_EQ(make_backend("host")->memory_kind(), MemoryKind::host);
  EXPECT_EQ(make_backend("sim:1GB")->memory_kind(), MemoryKind::simulated);
}

TEST(BackendFactory, RejectsBadSpecsWithTheFix) {
  for (const char* spec :
       {"", "gpu", "sim:", "sim:0", "sim:lots", "cuda:x", "cuda:-1", "cuda:1.5"}) {
    try {
      (void)make_backend(spec);
      ADD_FAILURE() << "accepted '" << spec << "'";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(spec), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace memscope
