// Checks of the arguments of the Backend page-mapping calls (backend.hpp), shared by the
// backends: a misaligned address or a page size that does not divide the bytes is a caller's
// bug, and each backend reports it the same way instead of letting the OS or driver answer
// with a bare EINVAL.
#pragma once

#include <cstddef>
#include <string>

namespace memscope::detail {

// "<backend> <call>(address 0x..., <bytes> bytes, page <page>)": the prefix of errors.
[[nodiscard]] std::string describe_page_call(const std::string& backend, const char* call,
                                             const void* address, std::size_t bytes,
                                             std::size_t page);

// Throws BackendError (naming the backend, the call and the arguments) unless `bytes` is above
// zero, `page` is a multiple of `granularity` dividing `bytes`, and `address` is aligned to
// `granularity`. `granularity` is a power of two.
void check_page_args(const std::string& backend, const char* call, const void* address,
                     std::size_t bytes, std::size_t page, std::size_t granularity);

// Throws BackendError unless `bytes` is a positive multiple of `granularity` (for
// reserve_address_range and release_address_range).
void check_range_size(const std::string& backend, const char* call, std::size_t bytes,
                      std::size_t granularity);

}  // namespace memscope::detail
