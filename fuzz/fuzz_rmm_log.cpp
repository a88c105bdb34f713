// Fuzz target: the RMM allocation-log reader (CSV) and the replay of what it reads. Any input is
// either read (then planned and replayed on a small simulated device) or refused with
// TraceFormatError; nothing else may escape and nothing may crash, hang or exhaust memory.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "memscope/errors.hpp"
#include "memscope/trace.hpp"
#include "replay_snapshot.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)memscope::detect_trace_format(text);
  try {
    memscope::fuzz::plan_and_replay(memscope::read_rmm_log(text, "fuzz"));
  } catch (const memscope::TraceFormatError&) {
    // Refused with a typed error: the expected outcome for most inputs.
  }
  return 0;
}
