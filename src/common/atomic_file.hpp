// The library's own callers name these in detail, where they lived before they were public
// (include/memscope/atomic_file.hpp).
#pragma once

#include "memscope/atomic_file.hpp"

namespace memscope::detail {

using memscope::FolderLock;
using memscope::write_file_atomically;

}  // namespace memscope::detail
