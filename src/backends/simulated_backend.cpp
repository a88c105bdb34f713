#include "memscope/simulated_backend.hpp"

#include "memscope/units.hpp"

namespace memscope {
namespace {
constexpr std::uintptr_t kFirstAddress = std::uintptr_t{1} << 40;  // 1 TiB: clearly not a heap
constexpr std::uintptr_t kAlignment = 2 * MiB;
}  // namespace

SimulatedBackend::SimulatedBackend(std::size_t capacity_bytes)
    : capacity_(capacity_bytes), next_address_(kFirstAddress) {}

std::string SimulatedBackend::name() const {
  return BackendSpec{.type = BackendSpec::Type::simulated, .capacity = capacity_}.to_string();
}

std::size_t SimulatedBackend::free_bytes() const {
  const std::lock_guard lock(mutex_);
  return capacity_ - reserved_;
}

std::size_t SimulatedBackend::reserved_bytes() const {
  const std::lock_guard lock(mutex_);
  return reserved_;
}

void* SimulatedBackend::reserve(std::size_t bytes) {
  const std::lock_guard lock(mutex_);
  if (bytes > capacity_ - reserved_) return nullptr;
  reserved_ += bytes;
  const std::uintptr_t address = next_address_;
  next_address_ += (bytes + kAlignment - 1) / kAlignment * kAlignment;
  return reinterpret_cast<void*>(
      address);  // NOLINT(performance-no-int-to-ptr): no memory behind it
}

void SimulatedBackend::release(void* /*base*/, std::size_t bytes) noexcept {
  const std::lock_guard lock(mutex_);
  reserved_ -= bytes;
}

EventId SimulatedBackend::create_event() {
  const std::lock_guard lock(mutex_);
  return next_event_++;
}

void SimulatedBackend::destroy_event(EventId event) noexcept {
  const std::lock_guard lock(mutex_);
  pending_.erase(event);
}

void SimulatedBackend::record_event(EventId event, StreamId stream) {
  const std::lock_guard lock(mutex_);
  if (held_streams_.contains(stream)) {
    pending_[event] = stream;
  } else {
    pending_.erase(event);
  }
}

bool SimulatedBackend::query_event(EventId event) {
  const std::lock_guard lock(mutex_);
  return !pending_.contains(event);
}

void SimulatedBackend::synchronize_event(EventId event) {
  // Waiting on an event models the device finishing that stream's work up to the event.
  const std::lock_guard lock(mutex_);
  pending_.erase(event);
}

void SimulatedBackend::hold(StreamId stream) {
  const std::lock_guard lock(mutex_);
  held_streams_.insert(stream);
}

void SimulatedBackend::complete(StreamId stream) {
  const std::lock_guard lock(mutex_);
  held_streams_.erase(stream);
  std::erase_if(pending_, [stream](const auto& entry) { return entry.second == stream; });
}

std::size_t SimulatedBackend::pending_events() const {
  const std::lock_guard lock(mutex_);
  return pending_.size();
}

}  // namespace memscope
