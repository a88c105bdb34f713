// Fuzz target: the safe pickle reader and everything built on it. Any input is either read (and
// then, if it looks like a PyTorch snapshot, turned into a replay plan and replayed on a small
// simulated device) or refused with TraceFormatError; nothing else may escape and nothing may
// crash, hang or exhaust memory.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "memscope/errors.hpp"
#include "memscope/pickle.hpp"
#include "memscope/trace.hpp"
#include "replay_snapshot.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const memscope::PickleValue value = memscope::read_pickle(bytes, "fuzz");
    memscope::fuzz::plan_and_replay(memscope::read_torch_snapshot(value, "fuzz"));
  } catch (const memscope::TraceFormatError&) {
    // Refused with a typed error: the expected outcome for most inputs.
  }
  return 0;
}
