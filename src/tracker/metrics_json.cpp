// save_metrics and load_metrics: metrics as JSON files, the Trainer's layout
// ({split}_results.json plus the merged all_results.json), written atomically.
#include <array>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <utility>

#include "common/atomic_file.hpp"
#include "memscope/errors.hpp"
#include "memscope/metrics.hpp"
#include "memscope/trace.hpp"  // read_whole_file()

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
std::string tokens_to_markers(std::string_view text) {
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

// The file's bytes, read once (a pipe or FIFO reads too); Error naming it when it cannot be read.
std::string read_metrics_file(const fs::path& file) {
  try {
    return read_whole_file(file);
  } catch (const TraceFormatError& e) {
    throw Error("memscope: cannot read metrics file " + file.string() + " (" + e.what() + ")");
  }
}

json read_json_object(const fs::path& file) {
  json j = json::parse(tokens_to_markers(read_metrics_file(file)), nullptr,
                       /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    throw Error("memscope: " + file.string() +
                " is not a JSON object of metrics; it was left untouched");
  }
  restore_non_finite(j);
  return j;
}

// Builds Metrics straight from the parser's events, with no JSON tree: a file of millions of
// keys then costs its metrics and its text only (a tree of 4,000,000 keys took gigabytes).
// Stops (false) at anything but one flat object of numbers, strings and booleans.
class MetricsSax final : public nlohmann::json_sax<json> {
 public:
  explicit MetricsSax(Metrics& out) : out_(out) {}
  bool null() override { return false; }
  bool boolean(bool value) override { return put(std::int64_t{value ? 1 : 0}); }
  bool number_integer(number_integer_t value) override { return put(std::int64_t{value}); }
  bool number_unsigned(number_unsigned_t value) override {
    // Beyond int64: a double, as a JSON tree's get<double>() would read it.
    if (value > static_cast<number_unsigned_t>(std::numeric_limits<std::int64_t>::max())) {
      return put(static_cast<double>(value));
    }
    return put(static_cast<std::int64_t>(value));
  }
  bool number_float(number_float_t value, const string_t& /*raw*/) override { return put(value); }
  bool string(string_t& value) override {
    if (std::string_view(value).starts_with(kMarker)) {  // NaN, Infinity, -Infinity
      for (const auto& [token, number] : kNonFinite) {
        if (std::string_view(value).substr(kMarker.size()) == token) return put(number);
      }
    }
    return put(std::move(value));
  }
  bool binary(binary_t& /*value*/) override { return false; }
  bool start_object(std::size_t /*elements*/) override { return depth_++ == 0; }
  bool key(string_t& key) override {
    if (std::string_view(key).starts_with(kMarker)) return false;  // a bare NaN as a key
    key_ = std::move(key);
    return true;
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool start_array(std::size_t /*elements*/) override { return false; }
  bool end_array() override { return false; }
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& /*ex*/) override {
    return false;
  }

 private:
  bool put(MetricValue value) {
    if (depth_ != 1) return false;  // a bare number or string is no metrics file
    out_.insert_or_assign(std::move(key_), std::move(value));  // the last of a repeated key
    return true;
  }
  Metrics& out_;
  std::string key_;
  int depth_ = 0;
};

std::optional<Metrics> parse_flat(std::string_view text) {
  Metrics out;
  MetricsSax sax(out);
  if (!json::sax_parse(text, &sax, json::input_format_t::json, /*strict=*/true)) {
    return std::nullopt;
  }
  return out;
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

std::optional<Metrics> parse_metrics(std::string_view text) {
  if (std::optional<Metrics> plain = parse_flat(text)) return plain;
  // Python's NaN and Infinity tokens are no JSON: only then is the text copied to rewrite them.
  const std::string rewritten = tokens_to_markers(text);
  if (rewritten.size() == text.size()) return std::nullopt;  // there were none
  return parse_flat(rewritten);
}

Metrics load_metrics(const fs::path& file) {
  std::optional<Metrics> metrics = parse_metrics(read_metrics_file(file));
  if (!metrics) {
    throw Error("memscope: " + file.string() +
                " is not saved metrics: one JSON object whose values are numbers, strings or "
                "booleans, as save_metrics writes");
  }
  return std::move(*metrics);
}

}  // namespace memscope
