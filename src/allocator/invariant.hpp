// How the allocator's invariant checkers (AllocatorCore::validate() and the checker beside each
// component) report a broken invariant: an InternalError naming the invariant's family.
#pragma once

#include <string>

#include "memscope/errors.hpp"

namespace memscope::detail {

struct Block;
struct Segment;

// Throws InternalError("memscope: allocator invariant '<invariant>' broken: <what>").
[[noreturn]] void broken_invariant(const char* invariant, const std::string& what);
// How a message names a block (address, size, state, segment) or a segment.
[[nodiscard]] std::string describe(const Block* b);
[[nodiscard]] std::string describe(const Segment* s);

}  // namespace memscope::detail
