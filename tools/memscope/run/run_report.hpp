// The report of a `memscope run` recording as a Report (memscope/report.hpp): what `run --html`
// draws and `memscope report` of a saved recording shows on its page.
//
// Thread safety: pure function. Errors: none.
#pragma once

#include "memscope/report.hpp"
#include "run/run_record.hpp"

namespace memscope::cli {

// Tree RSS, each process's RSS, GPU memory, stage bands, the tree's peak marked; tables of
// processes and stages. Says that RSS over time is sampled and peaks per process are VmHWM.
[[nodiscard]] report::Report report_of_run(const RunRecord& record);

}  // namespace memscope::cli
