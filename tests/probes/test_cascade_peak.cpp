// CascadePeak against a brute-force reference: a seeded random sequence of window opens,
// closes in any order, reads, resets and counter changes, where every window's peak must equal
// the maximum of every value the counter took while it was open.
#include <algorithm>
#include <cstdint>
#include <list>
#include <random>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "memscope/cascade_peak.hpp"

namespace memscope {
namespace {

// A counter with one resettable peak, like VmHWM or torch.cuda.max_memory_allocated.
struct FakeCounter {
  std::int64_t value = 0;
  std::int64_t high = 0;
  int resets = 0;
  bool fail = false;

  std::int64_t current() const {
    if (fail) throw std::runtime_error("counter gone");
    return value;
  }
  std::int64_t peak() const {
    if (fail) throw std::runtime_error("counter gone");
    return high;
  }
  void reset_peak() {
    high = value;
    ++resets;
  }
  void set(std::int64_t v) {
    value = v;
    high = std::max(high, v);
  }
};

// The same counter with a never-reset upper bound of its peak (as getrusage's maxrss bounds
// VmHWM), so CascadePeak takes the peak_at_least path.
struct BoundedCounter : FakeCounter {
  std::int64_t bound = 0;  // the highest value ever
  int peak_reads = 0;

  std::int64_t peak() {
    ++peak_reads;
    return FakeCounter::peak();
  }
  std::int64_t peak_at_least(std::int64_t known) {
    if (bound <= known) return known;
    return std::max(known, peak());
  }
  void set(std::int64_t v) {
    FakeCounter::set(v);
    bound = std::max(bound, v);
  }
};

struct Reference {  // one open window: its node and the true maximum since it opened
  CascadePeak<FakeCounter>::Window node;
  std::int64_t begin = 0;
  std::int64_t max = 0;
};

template <class Counter>
void check_random_sequence(unsigned seed) {
  SCOPED_TRACE(seed);
  std::mt19937 rng(seed);
  CascadePeak<Counter> cascade{Counter{}};
  Counter& counter = cascade.counter();
  std::list<Reference> open;  // std::list: window nodes must not move
  auto pick = [&](std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
  };

  for (int step = 0; step < 4000; ++step) {
    const std::size_t op = pick(10);
    if (op < 2 && open.size() < 12) {  // open
      Reference& r = open.emplace_back();
      r.begin = cascade.open(r.node);
      r.max = r.begin;
      EXPECT_EQ(r.begin, counter.value);
    } else if (op < 4 && !open.empty()) {  // close any window, not only the innermost
      auto it = std::next(open.begin(), static_cast<std::ptrdiff_t>(pick(open.size())));
      const auto reading = cascade.close(it->node);
      EXPECT_EQ(reading.current, counter.value);
      EXPECT_EQ(reading.peak, it->max) << "step " << step;
      EXPECT_FALSE(it->node.open);
      open.erase(it);
    } else if (op < 5 && !open.empty()) {  // read a window that stays open
      const Reference& r = *std::next(open.begin(), static_cast<std::ptrdiff_t>(pick(open.size())));
      const auto reading = cascade.read(r.node);
      EXPECT_EQ(reading.current, counter.value);
      EXPECT_EQ(reading.peak, r.max) << "step " << step;
    } else if (op < 6) {  // someone resets the peak through the cascade: loses nothing
      cascade.reset_peak();
    } else {  // the counter changes
      const auto v = static_cast<std::int64_t>(pick(1000));
      counter.set(v);
      for (Reference& r : open) r.max = std::max(r.max, v);
    }
  }
  while (!open.empty()) {
    EXPECT_EQ(cascade.close(open.back().node).peak, open.back().max);
    open.pop_back();
  }
  EXPECT_TRUE(cascade.empty());
  EXPECT_GT(counter.resets, 0);
}

TEST(CascadePeak, MatchesBruteForceOnRandomSequences) {
  for (unsigned seed = 1; seed <= 20; ++seed) check_random_sequence<FakeCounter>(seed);
}

TEST(CascadePeak, MatchesBruteForceWithAnUpperBound) {
  for (unsigned seed = 1; seed <= 20; ++seed) check_random_sequence<BoundedCounter>(seed);
}

TEST(CascadePeak, UpperBoundSkipsPeakReads) {
  CascadePeak<BoundedCounter> cascade{BoundedCounter{}};
  cascade.counter().set(100);
  CascadePeak<BoundedCounter>::Window w;
  cascade.open(w);
  const int before = cascade.counter().peak_reads;
  EXPECT_EQ(cascade.read(w).peak, 100);  // the bound (100) cannot exceed the known peak
  EXPECT_EQ(cascade.counter().peak_reads, before);
  (void)cascade.close(w);
}

TEST(CascadePeak, CloseOfAFailedCounterKeepsWhatWasSeen) {
  CascadePeak<FakeCounter> cascade{FakeCounter{}};
  CascadePeak<FakeCounter>::Window outer;
  CascadePeak<FakeCounter>::Window inner;
  cascade.counter().set(40);
  cascade.open(outer);
  cascade.counter().set(90);
  cascade.open(inner);  // folds 90 into outer
  cascade.counter().set(10);
  EXPECT_EQ(cascade.read(inner).current, 10);
  cascade.counter().fail = true;
  EXPECT_THROW((void)cascade.read(inner), std::runtime_error);
  std::exception_ptr error;
  const auto r = cascade.close(inner, &error);
  EXPECT_TRUE(error != nullptr);
  EXPECT_EQ(r.current, 10);  // the last value read
  EXPECT_EQ(r.peak, 90);
  EXPECT_FALSE(inner.open);
  const auto o = cascade.close(outer);  // no error pointer: still closes
  EXPECT_EQ(o.peak, 90);
  EXPECT_TRUE(cascade.empty());
}

}  // namespace
}  // namespace memscope
