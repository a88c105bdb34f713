// Stage marks for `memscope run` (stage_marks.hpp). Stub: being written.
#include "memscope/stage_marks.hpp"

namespace memscope {

bool stage_marks_enabled() noexcept { return false; }

void write_stage_mark(std::string_view /*kind*/, std::string_view /*stage*/,
                      const std::map<std::string, std::int64_t>& /*metrics*/) noexcept {}

}  // namespace memscope
