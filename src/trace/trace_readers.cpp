// Readers of JSON snapshots and RMM logs, and format detection.
// TODO(issue 11): being written.
#include "memscope/errors.hpp"
#include "memscope/trace.hpp"

namespace memscope {

TorchSnapshot read_torch_snapshot_json(std::string_view /*json*/, std::string_view /*source*/) {
  throw UsageError("read_torch_snapshot_json: not implemented yet");
}
TorchSnapshot read_rmm_log(std::string_view /*csv*/, std::string_view /*source*/) {
  throw UsageError("read_rmm_log: not implemented yet");
}
TorchSnapshot read_trace_file(const std::filesystem::path& path) {
  return read_torch_snapshot_file(path);
}

}  // namespace memscope
