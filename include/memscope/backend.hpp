// The backend interface: where the caching allocator gets its segments, and how it orders work
// with streams and events.
//
// A backend reserves and releases whole segments and knows nothing of blocks or statistics.
// Streams and events are opaque integer handles (a CUstream / CUevent on the CUDA backend, a
// counter on the simulated one), so the allocator never depends on a device API.
//
// Thread safety: every method may be called from any thread; the caching allocator serialises
// its own calls, but several allocators may share one backend.
// Ownership: reserve() hands the caller a segment it must give back with release(); events
// come from create_event() and go back with destroy_event().
// Errors: reserve() returns nullptr when the memory is not there (the allocator then takes its
// out-of-memory path) and throws BackendError for any other failure; release() and
// destroy_event() never throw.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace memscope {

using StreamId = std::uintptr_t;
using EventId = std::uintptr_t;
inline constexpr StreamId kDefaultStream = 0;

// What a pointer from this backend can be used for.
enum class MemoryKind {
  host,       // ordinary CPU memory, readable and writable by the process
  device,     // GPU memory, usable by kernels and copies, not by CPU loads
  simulated,  // addresses only: nothing is behind them and they must never be dereferenced
};

class Backend {
 public:
  Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  virtual ~Backend() = default;

  // "host", "sim:24GiB", "cuda:0": the spec make_backend() accepts to build this backend again.
  [[nodiscard]] virtual std::string name() const = 0;
  [[nodiscard]] virtual MemoryKind memory_kind() const noexcept = 0;
  // Total memory of the device (or of the machine, for the host backend).
  [[nodiscard]] virtual std::size_t capacity() const = 0;
  // What the device (or the OS) says is free right now, for every user, not only this process.
  [[nodiscard]] virtual std::size_t free_bytes() const = 0;

  // A segment of exactly `bytes` bytes, aligned to at least 512 bytes, or nullptr when the
  // backend is out of memory.
  [[nodiscard]] virtual void* reserve(std::size_t bytes) = 0;
  virtual void release(void* base, std::size_t bytes) noexcept = 0;

  // --- Page mapping, for the allocator's expandable segments -----------------------------
  // An address range is reserved with nothing behind it; pages of memory are then mapped into
  // it and unmapped from it, each page separately, so a segment can grow and shrink in place.
  // A backend that cannot do this keeps the defaults: page_granularity() 0, the rest throw
  // BackendError (the allocator refuses expandable_segments on it before calling them).

  // The smallest page map_pages() accepts, a power of two (host: the OS page; CUDA: the
  // driver's minimum granularity; simulated: 2 MiB). 0: the backend does not map pages.
  [[nodiscard]] virtual std::size_t page_granularity() const noexcept { return 0; }
  // `bytes` (a multiple of the granularity) of address space aligned to the granularity, with
  // no memory behind it and not counted in capacity; nullptr when the address space is used up.
  [[nodiscard]] virtual void* reserve_address_range(std::size_t bytes);
  // Gives a range back. Every page in it must have been unmapped.
  virtual void release_address_range(void* base, std::size_t bytes) noexcept;
  // Backs [address, address + bytes) inside a reserved range with memory, as pages of `page`
  // bytes (a multiple of the granularity dividing `bytes` and the offset from the range's
  // base) that unmap_pages() and move_pages() may later take one by one. Host memory is
  // populated (resident) on return. False when the memory is not there: nothing is mapped.
  // BackendError for other failures.
  [[nodiscard]] virtual bool map_pages(void* address, std::size_t bytes, std::size_t page);
  // Takes mapped pages away and gives their memory back to the device or the OS (the process
  // RSS falls on the host), once the work queued on `stream` before the call has finished.
  // Whole pages as mapped; never throws (a failure leaves the pages mapped and is reported by
  // the next call that fails).
  virtual void unmap_pages(void* address, std::size_t bytes, std::size_t page,
                           StreamId stream) noexcept;
  // Moves mapped pages from [from, from + bytes) to the unmapped [to, to + bytes) without
  // copying or freeing their memory (host: mremap; CUDA: the same physical handles mapped at
  // the new place), once the work queued on `stream` before the call has finished; `from`
  // is unmapped after it. False when the backend cannot move them: nothing changed, and the
  // caller unmaps and maps instead. BackendError for other failures.
  [[nodiscard]] virtual bool move_pages(void* from, void* to, std::size_t bytes, std::size_t page,
                                        StreamId stream);

  [[nodiscard]] virtual EventId create_event() = 0;
  virtual void destroy_event(EventId event) noexcept = 0;
  // Marks the point in `stream`'s queue that the event completes at.
  virtual void record_event(EventId event, StreamId stream) = 0;
  // True once all work queued on the event's stream before record_event() has finished.
  [[nodiscard]] virtual bool query_event(EventId event) = 0;
  // Blocks until query_event() would return true.
  virtual void synchronize_event(EventId event) = 0;
};

// A backend spec, parsed: "host", "sim:<size>" (e.g. "sim:24GiB", a simulated device of that
// capacity), "cuda" (device 0) or "cuda:<index>". The one parser of these strings: make_backend(),
// the Python registry and the extension's BackendSpec all go through it. A plain value.
struct BackendSpec {
  enum class Type { host, simulated, cuda };

  Type type = Type::host;
  std::size_t capacity = 0;  // simulated: the device's bytes (above zero)
  int device_index = 0;      // cuda: the device as this process numbers visible devices (>= 0)

  // Throws ConfigError naming the spec and the forms allowed. Sizes take any spelling that
  // parse_size_with_unit() reads ("sim:24 GiB", "sim:1.5GB", "sim:4096B"; not "sim:24").
  [[nodiscard]] static BackendSpec parse(std::string_view spec);
  // The canonical spelling ("host", "sim:24GiB", "cuda:0"): parse() gives this spec back, and it
  // is the name() of the backend make_backend() builds from it.
  [[nodiscard]] std::string to_string() const;

  friend bool operator==(const BackendSpec&, const BackendSpec&) = default;
};

// Builds a backend from its spec. Throws ConfigError for a spec it does not understand (or a
// BackendSpec with a zero capacity or a negative index) and BackendUnavailableError when the
// backend cannot run here (the message says why).
[[nodiscard]] std::unique_ptr<Backend> make_backend(const BackendSpec& spec);
[[nodiscard]] std::unique_ptr<Backend> make_backend(std::string_view spec);

}  // namespace memscope
