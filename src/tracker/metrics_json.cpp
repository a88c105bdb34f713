// save_metrics and load_metrics: metrics as JSON files, the Trainer's layout
// ({split}_results.json plus the merged all_results.json), written atomically.
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "memscope/errors.hpp"
#include "memscope/metrics.hpp"
#include "tracker/atomic_file.hpp"

namespace memscope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json to_json(const Metrics& metrics) {
  json out = json::object();
  for (const auto& entry : metrics) {
    std::visit([&](const auto& v) { out[entry.first] = v; }, entry.second);
  }
  return out;
}

// The Trainer writes json.dump(indent=4, sort_keys=True); nlohmann's object is sorted too.
std::string dump(const json& j) {
  return j.dump(4) + "\n";
}

json read_json_object(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw Error("memscope: cannot read metrics file " + file.string());
  std::stringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    throw Error("memscope: " + file.string() +
                " is not a JSON object of metrics; it was left untouched");
  }
  return j;
}

void check_split(std::string_view split) {
  if (split.empty() || split.find_first_of("/\\") != std::string_view::npos || split[0] == '.') {
    throw UsageError("memscope: save_metrics split '" + std::string(split) +
                     "' cannot name a file: use a plain name such as train, eval or test");
  }
}

}  // namespace

void save_metrics(std::string_view split, const Metrics& metrics, const fs::path& output_dir,
                  bool combined) {
  check_split(split);
  std::error_code ec;
  fs::create_directories(output_dir, ec);
  if (ec) {
    throw BackendError("memscope: cannot create " + output_dir.string() + " (" + ec.message() +
                       ")");
  }
  json values = to_json(metrics);
  detail::write_file_atomically(output_dir / (std::string(split) + "_results.json"), dump(values));
  if (!combined) return;

  // Read, merge and replace under a lock on the folder, so concurrent savers lose no keys.
  detail::FolderLock lock(output_dir);
  const fs::path all = output_dir / "all_results.json";
  json merged = fs::exists(all) ? read_json_object(all) : json::object();
  merged.update(values);  // new keys replace old ones; every other key stays
  detail::write_file_atomically(all, dump(merged));
}

Metrics load_metrics(const fs::path& file) {
  Metrics out;
  const json j = read_json_object(file);  // named: items() must not outlive it
  for (const auto& [key, value] : j.items()) {
    if (value.is_number_integer()) {
      out.emplace(key, value.get<std::int64_t>());
    } else if (value.is_number()) {
      out.emplace(key, value.get<double>());
    } else if (value.is_string()) {
      out.emplace(key, value.get<std::string>());
    } else if (value.is_boolean()) {
      out.emplace(key, static_cast<std::int64_t>(value.get<bool>() ? 1 : 0));
    } else {
      throw Error("memscope: " + file.string() + ": metric '" + key +
                  "' is not a number or a string");
    }
  }
  return out;
}

}  // namespace memscope
