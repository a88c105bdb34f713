#include "gpu_support.hpp"

#include <chrono>
#include <cstdint>
#include <thread>

#include "backends/cuda/driver_loader.hpp"
#include "backends/cuda/scoped_context.hpp"
#include "memscope/errors.hpp"

namespace memscope::testing {
namespace {

namespace cu = memscope::cu;
using detail::check_cuda;

// One thread spinning on %globaltimer (nanoseconds) until the given time has passed. PTX 7.0
// for sm_52 is compiled by any driver since CUDA 11.0 for whatever GPU it runs on.
constexpr char kSpinPtx[] = R"(
.version 7.0
.target sm_52
.address_size 64

.visible .entry memscope_spin(.param .u64 nanoseconds)
{
  .reg .pred %p;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [nanoseconds];
  mov.u64 %rd2, %globaltimer;
$L_spin:
  mov.u64 %rd3, %globaltimer;
  sub.s64 %rd4, %rd3, %rd2;
  setp.lt.u64 %p, %rd4, %rd1;
  @%p bra $L_spin;
  ret;
}
)";

const detail::CudaDriver& driver() {
  const detail::DriverLoad& load = detail::cuda_driver();
  if (load.driver == nullptr) throw BackendUnavailableError(load.reason);
  return *load.driver;
}

cu::CUcontext context_of(const CudaBackend& backend) {
  return reinterpret_cast<cu::CUcontext>(backend.context());  // NOLINT(performance-no-int-to-ptr)
}

cu::CUstream to_stream(StreamId stream) {
  return reinterpret_cast<cu::CUstream>(stream);  // NOLINT(performance-no-int-to-ptr)
}

cu::CUdeviceptr to_device(const void* pointer) {
  return reinterpret_cast<cu::CUdeviceptr>(pointer);
}

}  // namespace

GpuWork::GpuWork(const CudaBackend& backend) : backend_(backend) {}

GpuWork::~GpuWork() {
  const detail::CudaDriver& d = driver();
  detail::ScopedContext scope(d, context_of(backend_), std::nothrow);
  for (const StreamId s : streams_) {
    (void)d.cuStreamSynchronize(to_stream(s));
    (void)d.cuStreamDestroy(to_stream(s));
  }
  if (module_ != nullptr) (void)d.cuModuleUnload(static_cast<cu::CUmodule>(module_));
}

StreamId GpuWork::new_stream() {
  const detail::CudaDriver& d = driver();
  detail::ScopedContext scope(d, context_of(backend_));
  cu::CUstream stream = nullptr;
  check_cuda(d, d.cuStreamCreate(&stream, cu::CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  streams_.push_back(reinterpret_cast<StreamId>(stream));
  return streams_.back();
}

void GpuWork::spin(StreamId stream, std::chrono::milliseconds duration) {
  const detail::CudaDriver& d = driver();
  detail::ScopedContext scope(d, context_of(backend_));
  if (spin_ == nullptr) {
    cu::CUmodule module = nullptr;
    check_cuda(d, d.cuModuleLoadData(&module, kSpinPtx), "cuModuleLoadData(spin kernel PTX)");
    module_ = module;
    cu::CUfunction function = nullptr;
    check_cuda(d, d.cuModuleGetFunction(&function, module, "memscope_spin"), "cuModuleGetFunction");
    spin_ = function;
  }
  auto nanoseconds = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(duration).count());
  void* params[] = {&nanoseconds};
  check_cuda(d,
             d.cuLaunchKernel(static_cast<cu::CUfunction>(spin_), 1, 1, 1, 1, 1, 1, 0,
                              to_stream(stream), params, nullptr),
             "cuLaunchKernel(spin)");
}

bool GpuWork::busy(StreamId stream) {
  const detail::CudaDriver& d = driver();
  detail::ScopedContext scope(d, context_of(backend_));
  const cu::CUresult result = d.cuStreamQuery(to_stream(stream));
  if (result == cu::CUDA_ERROR_NOT_READY) return true;
  check_cuda(d, result, "cuStreamQuery");
  return false;
}

void GpuWork::synchronize(StreamId stream) {
  const detail::CudaDriver& d = driver();
  detail::ScopedContext scope(d, context_of(backend_));
  check_cuda(d, d.cuStreamSynchronize(to_stream(stream)), "cuStreamSynchronize");
}

void GpuWork::fill(void* device, unsigned char value, std::size_t bytes, StreamId stream) {
  const detail::CudaDriver& d = driver();
  detail::ScopedContext scope(d, context_of(backend_));
  check_cuda(d, d.cuMemsetD8Async(to_device(device), value, bytes, to_stream(stream)),
             "cuMemsetD8Async");
}

std::vector<unsigned char> GpuWork::read(const void* device, std::size_t bytes) {
  const detail::CudaDriver& d = driver();
  detail::ScopedContext scope(d, context_of(backend_));
  std::vector<unsigned char> host(bytes);
  check_cuda(d, d.cuMemcpyDtoH(host.data(), to_device(device), bytes), "cuMemcpyDtoH");
  return host;
}

NvmlView::NvmlView(const NvmlProbe& probe, unsigned index) : probe_(probe), index_(index) {
  per_process_ = probe_.own_process_memory(index_).has_value();
}

std::int64_t NvmlView::settled() const {
  std::int64_t last = read();
  for (int i = 0; i < 50; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const std::int64_t now = read();
    if (now == last) return now;
    last = now;
  }
  return last;
}

std::int64_t NvmlView::read() const {
  if (per_process_) return static_cast<std::int64_t>(probe_.own_process_memory(index_).value_or(0));
  return static_cast<std::int64_t>(probe_.memory(index_).used);
}

}  // namespace memscope::testing
