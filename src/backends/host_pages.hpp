// A piece of HostBackend::move_pages (host_pages.cpp), declared for its test: kernels before
// Linux 6.17 refuse (EFAULT) to mremap a source made of several mappings, and the backend then
// moves it in pieces; newer kernels never take this path, so the test calls it directly.
#pragma once

#include <cstddef>

namespace memscope::detail {

// Moves [from, from + bytes) to `to` with mremap(MREMAP_FIXED | MREMAP_DONTUNMAP), `piece`
// bytes at a time, and OS page by OS page within a piece that spans mappings; each moved part
// of the source becomes PROT_NONE again. Returns 0, or the errno of the call that failed;
// `any_moved` says whether some part had moved by then. Never throws.
[[nodiscard]] int host_move_in_pieces(void* from, void* to, std::size_t bytes, std::size_t piece,
                                      bool& any_moved) noexcept;

}  // namespace memscope::detail
