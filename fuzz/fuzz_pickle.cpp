// Fuzz target: the safe pickle reader and everything built on it. Any input is either read (and
// then, if it looks like a PyTorch snapshot, turned into a replay plan and replayed on a small
// simulated device) or refused with TraceFormatError; nothing else may escape and nothing may
// crash, hang or exhaust memory. The snapshot read in place (read_torch_snapshot_pickle) must
// agree with the one read through a PickleValue: the same snapshot, or the same error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "memscope/errors.hpp"
#include "memscope/pickle.hpp"
#include "memscope/trace.hpp"
#include "replay_snapshot.hpp"

namespace {

// The snapshot as JSON, or the error's message.
template <class Read>
std::string outcome(Read&& read) {
  try {
    return memscope::torch_snapshot_json(read());
  } catch (const std::exception& e) {
    return std::string("error: ") + e.what();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::string via_value = outcome(
      [&] { return memscope::read_torch_snapshot(memscope::read_pickle(bytes, "fuzz"), "fuzz"); });
  const std::string direct =
      outcome([&] { return memscope::read_torch_snapshot_pickle(bytes, "fuzz"); });
  if (via_value != direct) std::abort();  // the two readers disagree
  try {
    const memscope::PickleValue value = memscope::read_pickle(bytes, "fuzz");
    memscope::fuzz::plan_and_replay(memscope::read_torch_snapshot(value, "fuzz"));
  } catch (const memscope::TraceFormatError&) {
    // Refused with a typed error: the expected outcome for most inputs.
  }
  return 0;
}
