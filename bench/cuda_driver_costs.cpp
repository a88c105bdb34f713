// memscope_cuda_driver_costs: what each driver call that page mapping makes costs on this GPU.
//
// memscope_driver_calls counts the calls a trace needs without a GPU; this program prices them on
// one, so the two together say where the time of a cold replay goes. Median microseconds over
// `--repeat` rounds of: cuMemCreate / cuMemMap / cuMemSetAccess / cuMemUnmap / cuMemRelease for
// one handle of 2, 4, 8, 20, 32 and 64 MiB; cuMemSetAccess over a range of 32 such 2 MiB
// mappings at once; cuMemAlloc/cuMemFree of the same sizes; cuMemGetInfo; cuCtxGetCurrent; and
// cuStreamSynchronize on an idle stream. Prints JSON lines ({"call":..., "bytes":..., "us":...}).
// Linked against the driver (libcuda.so.1), so it starts only where a driver is installed; with a
// driver but no usable GPU it says so and exits 0. Built where CMake finds the CUDA toolkit.
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double micros(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

bool ok(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return true;
  const char* name = nullptr;
  cuGetErrorName(r, &name);
  std::printf("{\"error\":\"%s\",\"result\":\"%s\"}\n", what, name != nullptr ? name : "?");
  return false;
}

void emit(const char* call, std::size_t bytes, const std::vector<double>& samples) {
  std::printf("{\"call\":\"%s\",\"bytes\":%zu,\"us\":%.2f,\"n\":%zu}\n", call, bytes,
              median(samples), samples.size());
}

constexpr std::size_t MiB = 1 << 20;

// What every mapping needs: pinned device memory, read/write access, an address range.
struct Mapping {
  CUmemAllocationProp prop{};
  CUmemAccessDesc access{};
  CUdeviceptr range = 0;
};

// Create / map / set access / unmap / release of one handle, and cuMemAlloc / cuMemFree, by size.
bool time_map_calls(const Mapping& m, int repeat) {
  for (const std::size_t size : {2 * MiB, 4 * MiB, 8 * MiB, 20 * MiB, 32 * MiB, 64 * MiB}) {
    std::vector<double> create, map, set_access, unmap, release, alloc, free;
    for (int i = 0; i < repeat; ++i) {
      CUmemGenericAllocationHandle handle = 0;
      auto t0 = Clock::now();
      if (!ok(cuMemCreate(&handle, size, &m.prop, 0), "cuMemCreate")) return false;
      auto t1 = Clock::now();
      if (!ok(cuMemMap(m.range, size, 0, handle, 0), "cuMemMap")) return false;
      auto t2 = Clock::now();
      if (!ok(cuMemSetAccess(m.range, size, &m.access, 1), "cuMemSetAccess")) return false;
      auto t3 = Clock::now();
      if (!ok(cuMemUnmap(m.range, size), "cuMemUnmap")) return false;
      auto t4 = Clock::now();
      if (!ok(cuMemRelease(handle), "cuMemRelease")) return false;
      auto t5 = Clock::now();
      create.push_back(micros(t0, t1));
      map.push_back(micros(t1, t2));
      set_access.push_back(micros(t2, t3));
      unmap.push_back(micros(t3, t4));
      release.push_back(micros(t4, t5));
      CUdeviceptr p = 0;
      t0 = Clock::now();
      if (!ok(cuMemAlloc(&p, size), "cuMemAlloc")) return false;
      t1 = Clock::now();
      if (!ok(cuMemFree(p), "cuMemFree")) return false;
      t2 = Clock::now();
      alloc.push_back(micros(t0, t1));
      free.push_back(micros(t1, t2));
    }
    emit("cuMemCreate", size, create);
    emit("cuMemMap", size, map);
    emit("cuMemSetAccess", size, set_access);
    emit("cuMemUnmap", size, unmap);
    emit("cuMemRelease", size, release);
    emit("cuMemAlloc", size, alloc);
    emit("cuMemFree", size, free);
  }
  return true;
}

// One cuMemSetAccess over 32 mappings of 2 MiB: what one access call per map_pages costs.
bool time_access_over_mappings(const Mapping& m, int repeat) {
  std::vector<double> set_access;
  std::vector<CUmemGenericAllocationHandle> handles(32);
  for (int i = 0; i < repeat; ++i) {
    for (std::size_t k = 0; k < handles.size(); ++k) {
      if (!ok(cuMemCreate(&handles[k], 2 * MiB, &m.prop, 0), "cuMemCreate") ||
          !ok(cuMemMap(m.range + k * 2 * MiB, 2 * MiB, 0, handles[k], 0), "cuMemMap")) {
        return false;
      }
    }
    const auto t0 = Clock::now();
    if (!ok(cuMemSetAccess(m.range, 64 * MiB, &m.access, 1), "cuMemSetAccess")) return false;
    set_access.push_back(micros(t0, Clock::now()));
    for (std::size_t k = 0; k < handles.size(); ++k) {
      (void)cuMemUnmap(m.range + k * 2 * MiB, 2 * MiB);
      (void)cuMemRelease(handles[k]);
    }
  }
  emit("cuMemSetAccess(32 x 2 MiB mappings)", 64 * MiB, set_access);
  return true;
}

// cuMemGetInfo, cuCtxGetCurrent and cuStreamSynchronize on an idle stream.
bool time_queries(int repeat) {
  std::vector<double> info, current, sync;
  CUstream stream = nullptr;
  if (!ok(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate")) return false;
  for (int i = 0; i < repeat * 10; ++i) {
    std::size_t free_bytes = 0;
    std::size_t total = 0;
    CUcontext c = nullptr;
    auto t0 = Clock::now();
    (void)cuMemGetInfo(&free_bytes, &total);
    auto t1 = Clock::now();
    (void)cuCtxGetCurrent(&c);
    auto t2 = Clock::now();
    (void)cuStreamSynchronize(stream);
    auto t3 = Clock::now();
    info.push_back(micros(t0, t1));
    current.push_back(micros(t1, t2));
    sync.push_back(micros(t2, t3));
  }
  emit("cuMemGetInfo", 0, info);
  emit("cuCtxGetCurrent", 0, current);
  emit("cuStreamSynchronize(idle)", 0, sync);
  (void)cuStreamDestroy(stream);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 20;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--repeat") == 0) repeat = std::max(1, std::atoi(argv[i + 1]));
  }
  if (cuInit(0) != CUDA_SUCCESS) {
    std::printf("{\"skipped\":\"no usable CUDA driver or GPU\"}\n");
    return 0;
  }
  CUdevice device = 0;
  CUcontext context = nullptr;
  if (!ok(cuDeviceGet(&device, 0), "cuDeviceGet") ||
      !ok(cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain") ||
      !ok(cuCtxSetCurrent(context), "cuCtxSetCurrent")) {
    return 1;
  }
  Mapping m;
  m.prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  m.prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  m.prop.location.id = device;
  m.access.location = m.prop.location;
  m.access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  const std::size_t range_bytes = std::size_t{64} * 32 * MiB;
  if (!ok(cuMemAddressReserve(&m.range, range_bytes, 0, 0, 0), "cuMemAddressReserve")) return 1;
  if (!time_map_calls(m, repeat) || !time_access_over_mappings(m, repeat) ||
      !time_queries(repeat)) {
    return 1;
  }
  (void)cuMemAddressFree(m.range, range_bytes);
  (void)cuDevicePrimaryCtxRelease(device);
  return 0;
}
