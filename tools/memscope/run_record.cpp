// Stub: being written (run_record.hpp).
#include "run_record.hpp"

#include <nlohmann/json.hpp>

namespace memscope::cli {

nlohmann::json run_record_to_json(const RunRecord& /*record*/) { return nlohmann::json::object(); }
RunRecord run_record_from_json(const nlohmann::json& /*json*/, const std::string& /*source*/) {
  return {};
}
bool is_run_record(const nlohmann::json& json) {
  return json.is_object() && json.value("format", "") == "memscope-run";
}

}  // namespace memscope::cli
