// The C interface of an allocator plug-in for memscope_gpu_peers (bench/gpu_peers.cpp): a shared
// object built where the peer's library lives (PyTorch's caching allocator is built on the GPU
// machine, against that machine's torch, by `scripts/gpu-check --run`) and loaded with dlopen,
// so that every allocator is measured by the same loop in the same process.
//
// Every function is called from one thread. Sizes are bytes; pointers are device pointers.
#ifndef MEMSCOPE_BENCH_GPU_PEER_H
#define MEMSCOPE_BENCH_GPU_PEER_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// Prepares the allocator on CUDA device 0. Returns NULL when ready, else why it cannot be used
// (a static string owned by the plug-in).
const char* memscope_peer_open(void);
// A block of at least `bytes` bytes on the current stream; NULL when it cannot be had.
void* memscope_peer_allocate(size_t bytes);
void memscope_peer_deallocate(void* ptr);
// Peak reserved bytes since the last reset, as the allocator itself reports it; -1 unknown.
long long memscope_peer_peak_reserved(void);
void memscope_peer_reset_peak(void);
// Returns every cached block to the driver.
void memscope_peer_empty_cache(void);

#ifdef __cplusplus
}
#endif

#endif  // MEMSCOPE_BENCH_GPU_PEER_H
