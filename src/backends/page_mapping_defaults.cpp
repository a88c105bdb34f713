// The Backend base class's answers for a backend that does not map pages (backend.hpp): the
// allocator checks page_granularity() first, so reaching these is a caller's bug.
#include <string>

#include "memscope/backend.hpp"
#include "memscope/errors.hpp"

namespace memscope {
namespace {
[[noreturn]] void refuse(const Backend& backend, const char* what) {
  throw BackendError(std::string("backend ") + backend.name() + " does not map pages (" + what +
                     "): page_granularity() is 0; turn expandable_segments off for it");
}
}  // namespace

void* Backend::reserve_address_range(std::size_t /*bytes*/) {
  refuse(*this, "reserve_address_range");
}

void Backend::release_address_range(void* /*base*/, std::size_t /*bytes*/) noexcept {}

bool Backend::map_pages(void* /*address*/, std::size_t /*bytes*/, std::size_t /*page*/) {
  refuse(*this, "map_pages");
}

void Backend::unmap_pages(void* /*address*/, std::size_t /*bytes*/, std::size_t /*page*/,
                          StreamId /*stream*/) noexcept {}

bool Backend::move_pages(void* /*from*/, void* /*to*/, std::size_t /*bytes*/, std::size_t /*page*/,
                         StreamId /*stream*/) {
  refuse(*this, "move_pages");
}

}  // namespace memscope
