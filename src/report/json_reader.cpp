// The typed JSON reader (json_reader.hpp).
#include "memscope/json_reader.hpp"

#include <cstdint>
#include <limits>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "memscope/errors.hpp"

namespace memscope::report {

JsonSource::JsonSource(std::string source, std::string kind)
    : source_(std::move(source)), kind_(std::move(kind)) {}

void JsonSource::fail(const std::string& path, std::string_view problem) const {
  const std::string where = path.empty() ? "the document" : "field '" + path + "'";
  throw ReportFormatError(fmt::format("{}: {} {} ({})", source_, where, problem, kind_));
}

double JsonSource::number_or_nan(const nlohmann::json& value, const std::string& path) const {
  if (value.is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (!value.is_number()) fail(path, "must be a number");
  return value.get<double>();
}

std::vector<std::string> JsonSource::texts(const nlohmann::json& list,
                                           const std::string& path) const {
  if (!list.is_array()) fail(path, "must be a list of strings");
  std::vector<std::string> out;
  out.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_string()) fail(json_element_path(path, i), "must be a string");
    out.push_back(list[i].get<std::string>());
  }
  return out;
}

std::string json_element_path(const std::string& path, std::size_t i) {
  return fmt::format("{}[{}]", path, i);
}

std::string json_member_path(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
}

JsonObject::JsonObject(const JsonSource& source, const nlohmann::json& value, std::string path)
    : source_(&source), value_(&value), path_(std::move(path)) {
  if (!value.is_object()) source.fail(path_, "must be an object");
}

std::string JsonObject::path_of(std::string_view key) const {
  return json_member_path(path_, key);
}

void JsonObject::fail(std::string_view key, std::string_view problem) const {
  source_->fail(path_of(key), problem);
}

bool JsonObject::has(const char* key) const {
  const auto it = value_->find(key);
  return it != value_->end() && !it->is_null();
}

const nlohmann::json& JsonObject::at(const char* key) const {
  const auto it = value_->find(key);
  if (it == value_->end()) fail(key, "is missing");
  return *it;
}

std::string JsonObject::text(const char* key) const {
  const nlohmann::json& v = at(key);
  if (!v.is_string()) fail(key, "must be a string");
  return v.get<std::string>();
}

bool JsonObject::boolean(const char* key) const {
  const nlohmann::json& v = at(key);
  if (!v.is_boolean()) fail(key, "must be true or false");
  return v.get<bool>();
}

std::int64_t JsonObject::integer(const char* key) const {
  const nlohmann::json& v = at(key);
  if (!v.is_number_integer()) fail(key, "must be an integer");
  return v.get<std::int64_t>();
}

int JsonObject::small_int(const char* key) const {
  const std::int64_t v = integer(key);
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    fail(key, "is out of range");
  }
  return static_cast<int>(v);
}

std::optional<int> JsonObject::optional_small_int(const char* key) const {
  if (!has(key)) return std::nullopt;
  return small_int(key);
}

std::uint64_t JsonObject::unsigned_integer(const char* key) const {
  const nlohmann::json& v = at(key);
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0)) {
    fail(key, "must be a whole number, 0 or more");
  }
  return v.get<std::uint64_t>();
}

double JsonObject::number(const char* key) const {
  const nlohmann::json& v = at(key);
  if (!v.is_number()) fail(key, "must be a number");
  return v.get<double>();
}

double JsonObject::number_or_nan(const char* key) const {
  return source_->number_or_nan(at(key), path_of(key));
}

const nlohmann::json& JsonObject::array(const char* key) const {
  const nlohmann::json& v = at(key);
  if (!v.is_array()) fail(key, "must be an array");
  return v;
}

std::vector<std::string> JsonObject::texts(const char* key) const {
  return source_->texts(array(key), path_of(key));
}

std::vector<double> JsonObject::numbers(const char* key) const {
  const nlohmann::json& list = array(key);
  std::vector<double> out;
  out.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_number()) source_->fail(json_element_path(path_of(key), i), "must be a number");
    out.push_back(list[i].get<double>());
  }
  return out;
}

std::vector<double> JsonObject::numbers_or_nan(const char* key) const {
  const nlohmann::json& list = array(key);
  std::vector<double> out;
  out.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    out.push_back(source_->number_or_nan(list[i], json_element_path(path_of(key), i)));
  }
  return out;
}

std::vector<std::int64_t> JsonObject::integers(const char* key) const {
  const nlohmann::json& list = array(key);
  std::vector<std::int64_t> out;
  out.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_number_integer()) {
      source_->fail(json_element_path(path_of(key), i), "must be an integer");
    }
    out.push_back(list[i].get<std::int64_t>());
  }
  return out;
}

std::map<std::string, std::int64_t> JsonObject::integer_map(const char* key) const {
  std::map<std::string, std::int64_t> out;
  if (!has(key)) return out;
  const nlohmann::json& v = at(key);
  if (!v.is_object()) fail(key, "must be an object of integers");
  for (const auto& [name, value] : v.items()) {
    if (!value.is_number_integer()) {
      source_->fail(json_member_path(path_of(key), name), "must be an integer");
    }
    out.emplace(name, value.get<std::int64_t>());
  }
  return out;
}

JsonObject JsonObject::object(const char* key) const {
  return {*source_, at(key), path_of(key)};
}

std::vector<JsonObject> JsonObject::objects(const char* key) const {
  const nlohmann::json& list = array(key);
  std::vector<JsonObject> out;
  out.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    out.emplace_back(*source_, list[i], json_element_path(path_of(key), i));
  }
  return out;
}

}  // namespace memscope::report
