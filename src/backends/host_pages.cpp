// HostBackend's page mapping (backend.hpp): a reservation is a PROT_NONE mapping that holds the
// address range; pages are mapped into it with MAP_FIXED (which replaces the reservation's
// pages atomically) and unmapped by putting PROT_NONE pages back the same way, so the range
// never has a hole that another thread's mmap could take.
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "backends/host_pages.hpp"
#include "backends/page_args.hpp"
#include "common/errno_text.hpp"
#include "memscope/errors.hpp"
#include "memscope/host_backend.hpp"

namespace memscope {
namespace {

std::size_t os_page() noexcept {
  static const std::size_t size = [] {
    const long value = ::sysconf(_SC_PAGESIZE);
    return value > 0 ? static_cast<std::size_t>(value) : std::size_t{4096};
  }();
  return size;
}

[[noreturn]] void fail(const char* call, const void* address, std::size_t bytes, std::size_t page,
                       const char* syscall, int err) {
  throw BackendError(fmt::format("{}: {} failed: {}",
                                 detail::describe_page_call("host", call, address, bytes, page),
                                 syscall, detail::errno_text(err)));
}

// Reservation pages: no access, no memory, no commit charge.
constexpr int kReserveFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;

// Puts reservation pages over [address, address + bytes): the old pages are freed and the
// range stays ours. 0 or the errno.
int put_reservation(void* address, std::size_t bytes) noexcept {
  void* p = ::mmap(address, bytes, PROT_NONE, kReserveFlags | MAP_FIXED, -1, 0);
  return p == MAP_FAILED ? errno : 0;
}

char* at(void* base, std::size_t offset) noexcept {
  return static_cast<char*>(base) + offset;
}

// Moves the pages of [from, from + bytes) to `to` (mremap keeps them: no copy, no fault) and
// leaves reservation pages at `from`. 0 or the errno of mremap (the call changed nothing) or
// of the replacement (the pages moved, `from` is left mapped with no memory behind it).
int move_one(void* from, void* to, std::size_t bytes, bool& moved) noexcept {
  moved = false;
  void* p = ::mremap(from, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, to);
  if (p == MAP_FAILED) return errno;
  moved = true;
  // MREMAP_DONTUNMAP leaves `from` mapped read-write with its page tables gone; make it a
  // reservation again so a stray access faults instead of reading zeros.
  return put_reservation(from, bytes);
}

}  // namespace

namespace detail {

int host_move_in_pieces(void* from, void* to, std::size_t bytes, std::size_t piece,
                        bool& any_moved) noexcept {
  any_moved = false;
  int err = 0;
  bool moved = false;
  for (std::size_t done = 0; done < bytes && err == 0; done += piece) {
    err = move_one(at(from, done), at(to, done), piece, moved);
    any_moved = any_moved || moved;
    if (err != EFAULT || moved) continue;
    // The piece spans mappings too: an OS page lies in one.
    err = 0;
    for (std::size_t small = 0; small < piece && err == 0; small += os_page()) {
      err = move_one(at(from, done + small), at(to, done + small), os_page(), moved);
      any_moved = any_moved || moved;
    }
  }
  return err;
}

}  // namespace detail

std::size_t HostBackend::page_granularity() const noexcept {
  return os_page();
}

void* HostBackend::reserve_address_range(std::size_t bytes) {
  detail::check_range_size("host", "reserve_address_range", bytes, os_page());
  void* p = ::mmap(nullptr, bytes, PROT_NONE, kReserveFlags, -1, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    if (err == ENOMEM) return nullptr;  // address space (or the map count) used up
    throw BackendError(fmt::format("host reserve_address_range({} bytes): mmap failed: {}", bytes,
                                   detail::errno_text(err)));
  }
  return p;
}

void HostBackend::release_address_range(void* base, std::size_t bytes) noexcept {
  // Frees whatever is still mapped in it too; munmap only fails for a range we never made.
  if (base != nullptr) (void)::munmap(base, bytes);
}

bool HostBackend::map_pages(void* address, std::size_t bytes, std::size_t page) {
  detail::check_page_args("host", "map_pages", address, bytes, page, os_page());
  // As reserve(): refuse what the machine cannot back rather than meet the OOM killer.
  if (bytes > free_bytes()) return false;
  // MAP_FIXED replaces the reservation's pages in one step; MAP_POPULATE makes them resident
  // now, so mapped bytes are resident bytes, as on a device.
  void* p = ::mmap(address, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    // ENOMEM: no memory, or the process's map count (vm.max_map_count) is used up. The failed
    // MAP_FIXED call may have taken the reservation's pages away; put them back.
    if (err == ENOMEM) {
      (void)put_reservation(address, bytes);
      return false;
    }
    fail("map_pages", address, bytes, page, "mmap", err);
  }
  return true;
}

void HostBackend::unmap_pages(void* address, std::size_t bytes, std::size_t /*page*/,
                              StreamId /*stream*/) noexcept {
  // Work on host streams is complete already. The replacement frees the pages (RSS falls).
  if (address == nullptr || bytes == 0 || put_reservation(address, bytes) == 0) return;
  // It fails only when splitting the mapping would pass vm.max_map_count: free the memory at
  // least (MADV_DONTNEED splits nothing); the pages stay mapped, reading zeros.
  (void)::madvise(address, bytes, MADV_DONTNEED);
}

bool HostBackend::move_pages(void* from, void* to, std::size_t bytes, std::size_t page,
                             StreamId /*stream*/) {
  detail::check_page_args("host", "move_pages", from, bytes, page, os_page());
  detail::check_page_args("host", "move_pages", to, bytes, page, os_page());
  const auto a = reinterpret_cast<std::uintptr_t>(from);
  const auto b = reinterpret_cast<std::uintptr_t>(to);
  if (a < b + bytes && b < a + bytes) {
    throw BackendError(
        fmt::format("{}: the source and destination {:#x} overlap",
                    detail::describe_page_call("host", "move_pages", from, bytes, page), b));
  }
  bool moved = false;
  int err = move_one(from, to, bytes, moved);
  if (err == 0) return true;
  if (!moved) {
    // EINVAL: no MREMAP_DONTUNMAP (Linux < 5.7). ENOMEM: no memory for page tables or the map
    // count used up. Nothing changed; the caller unmaps and maps instead.
    if (err == EINVAL || err == ENOMEM) return false;
    if (err != EFAULT) fail("move_pages", from, bytes, page, "mremap", err);
    // EFAULT: the range spans several mappings (pages mapped or moved in separate calls, which
    // the kernel could not merge), and mremap before Linux 6.17 takes its source from one.
    err = detail::host_move_in_pieces(from, to, bytes, page, moved);
    if (err == 0) return true;
    if (!moved && (err == EINVAL || err == ENOMEM)) return false;
  }
  // A call failed after part of the range had moved (or the PROT_NONE replacement of the
  // source failed): both ranges are in part mapped. Report it rather than guess.
  fail("move_pages", from, bytes, page,
       moved ? "mremap/mmap after part of the range moved" : "mremap", err);
}

}  // namespace memscope
