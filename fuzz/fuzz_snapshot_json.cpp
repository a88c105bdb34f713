// Fuzz target: JSON snapshots (nlohmann's SAX parser into plain values, then the PyTorch
// snapshot reader) and the replay of what they hold. Any input is either read or refused with
// TraceFormatError; nothing else may escape and nothing may crash, hang or exhaust memory.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "memscope/errors.hpp"
#include "memscope/trace.hpp"
#include "replay_snapshot.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    memscope::fuzz::plan_and_replay(memscope::read_torch_snapshot_json(text, "fuzz"));
  } catch (const memscope::TraceFormatError&) {
    // Refused with a typed error: the expected outcome for most inputs.
  }
  return 0;
}
