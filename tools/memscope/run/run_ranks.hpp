// Forwards to the library's rank grouping (include/memscope/run_ranks.hpp) for the files that
// still name this header (report/report_builders.cpp). Remove once none does.
#pragma once

#include "memscope/run_ranks.hpp"  // IWYU pragma: export
