// PyTorch-compatible snapshot writers (pickle and JSON) and the atomic file write.
// TODO(issue 11): being written.
#include "memscope/errors.hpp"
#include "memscope/trace.hpp"

namespace memscope {

std::string torch_snapshot_pickle(const TorchSnapshot& /*snapshot*/, int /*protocol*/) {
  throw UsageError("torch_snapshot_pickle: not implemented yet");
}
std::string torch_snapshot_json(const TorchSnapshot& /*snapshot*/) {
  throw UsageError("torch_snapshot_json: not implemented yet");
}
void write_torch_snapshot(const TorchSnapshot& /*snapshot*/, const std::filesystem::path& /*path*/) {
  throw UsageError("write_torch_snapshot: not implemented yet");
}

}  // namespace memscope
