#include "memscope/simulated_backend.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "backends/page_args.hpp"
#include "memscope/errors.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {
constexpr std::uintptr_t kFirstAddress = std::uintptr_t{1} << 40;  // 1 TiB: clearly not a heap
constexpr std::uintptr_t kAlignment = 2 * MiB;
// Above this the simulated address space is used up (the 57-bit user space of 5-level paging).
constexpr std::uintptr_t kAddressLimit = std::uintptr_t{1} << 56;

std::uintptr_t to_int(const void* p) noexcept {
  return reinterpret_cast<std::uintptr_t>(p);
}
}  // namespace

SimulatedBackend::SimulatedBackend(std::size_t capacity_bytes)
    : capacity_(capacity_bytes), next_address_(kFirstAddress) {}

std::string SimulatedBackend::name() const {
  return BackendSpec{.type = BackendSpec::Type::simulated, .capacity = capacity_}.to_string();
}

std::size_t SimulatedBackend::free_bytes() const {
  const std::lock_guard lock(mutex_);
  return capacity_ - reserved_ - mapped_;
}

std::size_t SimulatedBackend::reserved_bytes() const {
  const std::lock_guard lock(mutex_);
  return reserved_ + mapped_;
}

std::size_t SimulatedBackend::mapped_bytes() const {
  const std::lock_guard lock(mutex_);
  return mapped_;
}

void* SimulatedBackend::reserve(std::size_t bytes) {
  const std::lock_guard lock(mutex_);
  if (bytes > capacity_ - reserved_ - mapped_) return nullptr;
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

// --- Page mapping ---------------------------------------------------------------------------

namespace memscope {

std::size_t SimulatedBackend::page_granularity() const noexcept {
  return kAlignment;
}

void* SimulatedBackend::reserve_address_range(std::size_t bytes) {
  detail::check_range_size(name(), "reserve_address_range", bytes, kAlignment);
  const std::lock_guard lock(mutex_);
  std::uintptr_t base = 0;
  if (bytes <= kAddressLimit - next_address_) {
    base = next_address_;
    next_address_ += bytes;  // a multiple of kAlignment: the counter stays aligned
  } else {
    base = reuse_released_range(bytes);
    if (base == 0) return nullptr;
  }
  ranges_.emplace(base, bytes);
  return reinterpret_cast<void*>(base);  // NOLINT(performance-no-int-to-ptr): addresses only
}

std::uintptr_t SimulatedBackend::reuse_released_range(std::size_t bytes) {
  // Best fit, lowest address among equals: what is left of the gap stays one gap. Linear in
  // the gaps, which adjacent releases coalesce, and reached only once the never-reused
  // addresses have run out.
  auto best = released_ranges_.end();
  for (auto gap = released_ranges_.begin(); gap != released_ranges_.end(); ++gap) {
    if (gap->second >= bytes && (best == released_ranges_.end() || gap->second < best->second)) {
      best = gap;
    }
  }
  if (best == released_ranges_.end()) return 0;
  const std::uintptr_t base = best->first;
  const std::size_t rest = best->second - bytes;
  released_ranges_.erase(best);
  if (rest > 0) released_ranges_.emplace(base + bytes, rest);
  return base;
}

void SimulatedBackend::remember_released_range(std::uintptr_t base, std::size_t bytes) {
  // Coalesced with the gaps either side, so a later reservation finds the whole hole.
  auto next = released_ranges_.lower_bound(base);
  if (next != released_ranges_.end() && next->first == base + bytes) {
    bytes += next->second;
    next = released_ranges_.erase(next);
  }
  if (next != released_ranges_.begin()) {
    const auto prev = std::prev(next);
    if (prev->first + prev->second == base) {
      prev->second += bytes;
      return;
    }
  }
  released_ranges_.emplace_hint(next, base, bytes);
}

void SimulatedBackend::release_address_range(void* base, std::size_t /*bytes*/) noexcept {
  const std::lock_guard lock(mutex_);
  const auto range = ranges_.find(to_int(base));
  if (range == ranges_.end()) return;
  // Pages the caller left mapped go with the range, as munmap would take them.
  mapped_ -= remove_mapped(range->first, range->first + range->second);
  try {
    remember_released_range(range->first, range->second);
  } catch (...) {  // NOLINT(bugprone-empty-catch): no memory for the note: the hole stays unused
  }
  ranges_.erase(range);
}

bool SimulatedBackend::map_pages(void* address, std::size_t bytes, std::size_t page) {
  const std::string label = name();
  detail::check_page_args(label, "map_pages", address, bytes, page, kAlignment);
  const std::uintptr_t begin = to_int(address);
  const std::lock_guard lock(mutex_);
  check_in_range("map_pages", begin, begin + bytes, page);
  if (any_mapped(begin, begin + bytes)) {
    throw BackendError(detail::describe_page_call(label, "map_pages", address, bytes, page) +
                       ": part of it is mapped already; unmap it first (a caller's bug)");
  }
  if (bytes > capacity_ - reserved_ - mapped_) return false;
  add_mapped(begin, begin + bytes);
  mapped_ += bytes;
  return true;
}

void SimulatedBackend::unmap_pages(void* address, std::size_t bytes, std::size_t /*page*/,
                                   StreamId /*stream*/) noexcept {
  // The stream's work counts as done: the bytes are free at once, as the contract's caller
  // has waited where it had to.
  const std::lock_guard lock(mutex_);
  const std::uintptr_t begin = to_int(address);
  mapped_ -= remove_mapped(begin, begin + bytes);
}

bool SimulatedBackend::move_pages(void* from, void* to, std::size_t bytes, std::size_t page,
                                  StreamId /*stream*/) {
  const std::string label = name();
  detail::check_page_args(label, "move_pages", from, bytes, page, kAlignment);
  detail::check_page_args(label, "move_pages", to, bytes, page, kAlignment);
  const std::uintptr_t source = to_int(from);
  const std::uintptr_t target = to_int(to);
  const std::lock_guard lock(mutex_);
  check_in_range("move_pages", target, target + bytes, page);
  const char* problem = nullptr;
  if (!all_mapped(source, source + bytes)) {
    problem = "the source is not all mapped";
  } else if (any_mapped(target, target + bytes)) {
    problem = "part of the destination is mapped already";
  }
  if (problem != nullptr) {
    throw BackendError(fmt::format(
        "{} to {:#x}: {} (a caller's bug)",
        detail::describe_page_call(label, "move_pages", from, bytes, page), target, problem));
  }
  (void)remove_mapped(source, source + bytes);  // the same bytes, mapped at the new place
  add_mapped(target, target + bytes);
  return true;
}

void SimulatedBackend::check_in_range(const char* call, std::uintptr_t begin, std::uintptr_t end,
                                      std::size_t page) const {
  auto range = ranges_.upper_bound(begin);
  if (range != ranges_.begin()) {
    range = std::prev(range);
    if (end <= range->first + range->second) {
      if ((begin - range->first) % page == 0) return;
      throw BackendError(
          fmt::format("{}: the page does not divide the offset {} from the range's base {:#x}",
                      detail::describe_page_call(name(), call, reinterpret_cast<const void*>(begin),
                                                 end - begin, page),
                      begin - range->first, range->first));
    }
  }
  throw BackendError(detail::describe_page_call(name(), call, reinterpret_cast<const void*>(begin),
                                                end - begin, page) +
                     ": not inside one range from reserve_address_range (a caller's bug)");
}

bool SimulatedBackend::any_mapped(std::uintptr_t begin, std::uintptr_t end) const {
  auto next = mapped_pages_.upper_bound(begin);  // first run starting after begin
  if (next != mapped_pages_.end() && next->first < end) return true;
  return next != mapped_pages_.begin() && std::prev(next)->second > begin;
}

bool SimulatedBackend::all_mapped(std::uintptr_t begin, std::uintptr_t end) const {
  // Runs are coalesced, so a fully mapped span lies in one run.
  auto run = mapped_pages_.upper_bound(begin);
  if (run == mapped_pages_.begin()) return false;
  run = std::prev(run);
  return run->first <= begin && end <= run->second;
}

void SimulatedBackend::add_mapped(std::uintptr_t begin, std::uintptr_t end) {
  // [begin, end) overlaps no run (checked by the caller); join the neighbours it touches.
  auto next = mapped_pages_.lower_bound(begin);
  if (next != mapped_pages_.end() && next->first == end) {
    end = next->second;
    next = mapped_pages_.erase(next);
  }
  if (next != mapped_pages_.begin()) {
    auto before = std::prev(next);
    if (before->second == begin) {
      before->second = end;
      return;
    }
  }
  mapped_pages_.emplace_hint(next, begin, end);
}

std::size_t SimulatedBackend::remove_mapped(std::uintptr_t begin, std::uintptr_t end) {
  std::size_t removed = 0;
  auto run = mapped_pages_.upper_bound(begin);
  if (run != mapped_pages_.begin() && std::prev(run)->second > begin) run = std::prev(run);
  while (run != mapped_pages_.end() && run->first < end) {
    const std::uintptr_t run_begin = run->first;
    const std::uintptr_t run_end = run->second;
    removed += std::min(run_end, end) - std::max(run_begin, begin);
    run = mapped_pages_.erase(run);
    if (run_begin < begin) mapped_pages_.emplace_hint(run, run_begin, begin);
    if (end < run_end) run = std::next(mapped_pages_.emplace_hint(run, end, run_end));
  }
  return removed;
}

}  // namespace memscope
