// The README's C++ example, built and run by the install test (tests/install) through
// find_package(memscope), so both the example and the package export stay correct.
#include <memscope/backend.hpp>
#include <memscope/caching_allocator.hpp>

#include <iostream>

int main() {
  // "host", "sim:24GiB" (addresses only, for planning) or "cuda:0".
  memscope::CachingAllocator alloc(memscope::make_backend("sim:24GiB"),
                                   memscope::AllocatorConfig::from_env());
  void* weights = alloc.allocate(512 << 20);  // 512 MiB, kept
  {
    memscope::PeakScope step = alloc.peak_scope();   // an independent, nestable peak
    void* activations = alloc.allocate(3ull << 30);  // 3 GiB, transient
    alloc.deallocate(activations);
    std::cout << "step peak: " << step.peak().allocated_bytes << " bytes\n";  // 3.5 GiB
  }
  auto stats = alloc.memory_stats();  // torch.cuda.memory_stats() keys
  std::cout << stats["allocated_bytes.all.current"] << " allocated, "
            << stats["reserved_bytes.all.current"] << " reserved\n";
  std::cout << alloc.empty_cache() << " bytes released\n";  // the cached 3 GiB segment
  alloc.deallocate(weights);
}
