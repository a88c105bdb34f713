// The envelope of memscope's JSON files (json_envelope.hpp).
#include "memscope/json_envelope.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "memscope/errors.hpp"
#include "memscope/report_json.hpp"

namespace memscope::report {

namespace {

constexpr std::string_view kPrefix = "memscope-";

// " (at 'report')" for an object inside the file; "" for the document itself.
std::string where(const JsonObject& object) {
  return object.path().empty() ? std::string() : " (at '" + object.path() + "')";
}

}  // namespace

std::string format_of_kind(std::string_view kind) {
  return std::string(kPrefix).append(kind);
}

nlohmann::json envelope(std::string_view kind, int version) {
  return nlohmann::json{{"format", format_of_kind(kind)}, {"version", version}};
}

std::optional<std::string> envelope_kind(const nlohmann::json& json) {
  if (!json.is_object()) return std::nullopt;
  const auto it = json.find("format");
  if (it == json.end() || !it->is_string()) return std::nullopt;
  const std::string& format = it->get_ref<const std::string&>();
  if (!format.starts_with(kPrefix)) return std::nullopt;
  return format.substr(kPrefix.size());
}

int read_envelope(const JsonObject& object, std::string_view kind, int max_version) {
  const std::string expected = format_of_kind(kind);
  const nlohmann::json& json = object.json();
  const auto format = json.find("format");
  if (format == json.end() || !format->is_string() || *format != expected) {
    const std::string found =
        format == json.end() ? std::string("no \"format\"") : "\"format\" " + json_text(*format);
    throw ReportFormatError(fmt::format("{}: not {}{}: it has {}, not \"{}\"",
                                        object.source().source(), object.source().kind(),
                                        where(object), found, expected));
  }
  const nlohmann::json& version = object.at("version");
  if (!version.is_number_integer() || version.get<std::int64_t>() < 1) {
    object.fail("version", fmt::format("must be an integer from 1 to {}", max_version));
  }
  const std::int64_t v = version.get<std::int64_t>();
  if (v > max_version) {
    throw ReportFormatError(fmt::format(
        "{}: {} version {}{} was written by a newer memscope (this one reads versions 1 to {}): "
        "upgrade memscope to read it",
        object.source().source(), expected, v, where(object), max_version));
  }
  return static_cast<int>(v);
}

}  // namespace memscope::report
