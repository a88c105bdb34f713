// save_metrics and load_metrics: metrics as JSON files, the Trainer's layout
// ({split}_results.json plus the merged all_results.json), written atomically.
#include <array>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>
#include <utility>

#include "common/atomic_file.hpp"
#include "memscope/errors.hpp"
#include "memscope/metrics.hpp"

namespace memscope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::string_view_literals;

// Non-finite numbers: JSON has none, so Python's json module (which the Trainer uses) writes
// the bare tokens NaN, Infinity and -Infinity and reads them back; we do the same, so a loss
// of NaN survives save_metrics -> load_metrics and a file either side wrote reads on the other.
// In the JSON tree they travel as marker strings that no metric can hold (a NUL first).
constexpr std::string_view kMarker = "\0memscope-nonfinite:"sv;
constexpr std::array<std::pair<std::string_view, double>, 3> kNonFinite{{
    {"NaN", std::numeric_limits<double>::quiet_NaN()},
    {"Infinity", std::numeric_limits<double>::infinity()},
    {"-Infinity", -std::numeric_limits<double>::infinity()},
}};

std::string_view token_of(double v) {
  if (std::isnan(v)) return kNonFinite[0].first;
  return v > 0 ? kNonFinite[1].first : kNonFinite[2].first;
}

json to_json(const Metrics& metrics) {
  json out = json::object();
  for (const auto& [key, value] : metrics) {
    std::visit([&, &k = key](const auto& v) { out[k] = v; }, value);
  }
  return out;
}

// Non-finite numbers to markers, at any depth.
void mark_non_finite(json& j) {
  if (j.is_structured()) {
    for (auto& child : j) mark_non_finite(child);
  } else if (j.is_number_float() && !std::isfinite(j.get<double>())) {
    j = std::string(kMarker) + std::string(token_of(j.get<double>()));
  }
}

// Markers back to numbers, at any depth (a merged file may hold other tools' nested values).
void restore_non_finite(json& j) {
  if (j.is_structured()) {
    for (auto& child : j) restore_non_finite(child);
    return;
  }
  if (!j.is_string()) return;
  const std::string_view text = j.get_ref<const std::string&>();
  if (!text.starts_with(kMarker)) return;
  for (const auto& [token, value] : kNonFinite) {
    if (text.substr(kMarker.size()) == token) {
      j = value;  // `text` dangles from here on
      return;
    }
  }
}

// The Trainer writes json.dump(indent=4, sort_keys=True); nlohmann's object is sorted too.
// Non-finite numbers (which nlohmann would write as null) come out as Python's tokens.
std::string dump(json j) {
  mark_non_finite(j);
  std::string text = j.dump(4) + "\n";
  const std::string quoted_marker = json(std::string(kMarker)).dump();  // "\u0000memscope-..."
  const std::string prefix = quoted_marker.substr(0, quoted_marker.size() - 1);
  for (std::size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at)) {
    const std::size_t end = text.find('"', at + prefix.size());
    text.replace(at, end + 1 - at, text.substr(at + prefix.size(), end - at - prefix.size()));
  }
  return text;
}

// Python's NaN, Infinity and -Infinity tokens (outside strings) become marker strings that
// nlohmann can parse; restore_non_finite turns them back into numbers.
std::string tokens_to_markers(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out.push_back(c);
      if (c == '\\' && i + 1 < text.size()) {
        out.push_back(text[++i]);
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    bool replaced = false;
    for (const auto& [token, value] : kNonFinite) {
      if (text.compare(i, token.size(), token) == 0) {
        out += json(std::string(kMarker) + std::string(token)).dump();
        i += token.size() - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out.push_back(c);
  }
  return out;
}

json read_json_object(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw Error("memscope: cannot read metrics file " + file.string());
  std::stringstream text;
  text << in.rdbuf();
  json j = json::parse(tokens_to_markers(text.str()), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    throw Error("memscope: " + file.string() +
                " is not a JSON object of metrics; it was left untouched");
  }
  restore_non_finite(j);
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
