#include "backends/page_args.hpp"

#include <fmt/format.h>

#include <cstdint>

#include "memscope/errors.hpp"

namespace memscope::detail {

std::string describe_page_call(const std::string& backend, const char* call, const void* address,
                               std::size_t bytes, std::size_t page) {
  return fmt::format("{} {}(address {:#x}, {} bytes, page {})", backend, call,
                     reinterpret_cast<std::uintptr_t>(address), bytes, page);
}

void check_page_args(const std::string& backend, const char* call, const void* address,
                     std::size_t bytes, std::size_t page, std::size_t granularity) {
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  const char* problem = nullptr;
  if (bytes == 0) {
    problem = "no bytes";
  } else if (page == 0 || page % granularity != 0) {
    problem = "the page is not a multiple of the backend's granularity";
  } else if (bytes % page != 0) {
    problem = "the bytes are not a whole number of pages";
  } else if (at % granularity != 0) {
    problem = "the address is not aligned to the backend's granularity";
  }
  if (problem == nullptr) return;
  throw BackendError(fmt::format("{}: {} (granularity {}); pass page-aligned whole pages",
                                 describe_page_call(backend, call, address, bytes, page), problem,
                                 granularity));
}

void check_range_size(const std::string& backend, const char* call, std::size_t bytes,
                      std::size_t granularity) {
  if (bytes != 0 && bytes % granularity == 0) return;
  throw BackendError(fmt::format(
      "{} {}({} bytes): the size must be a positive multiple of the granularity, {} bytes", backend,
      call, bytes, granularity));
}

}  // namespace memscope::detail
