// Typed reading of the JSON files memscope writes and reads back (a Report, a run recording, a
// replay result): the one reader of the tree. Every getter checks the value's type and, when it
// is missing or of the wrong type, throws ReportFormatError naming the file, the field by its
// JSON path ("processes[2].peak_rss") and what it must be, then which kind of file was expected,
// because these files are edited, truncated and hand-made:
//   run.json: field 'processes[2].peak_rss' must be an integer (a memscope run recording, ...)
//
// JsonSource is the file (its name and kind); JsonObject a view of one object of it and where it
// sits. A JsonObject refers to its JSON value and to its JsonSource, which must outlive it.
//
// Like report_json.hpp, this header names nlohmann::json (forward-declared): a program that
// includes it needs nlohmann_json 3.10 or later on its include path.
//
// Thread safety: const reads only. Errors: ReportFormatError, as above (std::bad_alloc aside).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace memscope::report {

class JsonSource {
 public:
  // `source`: the file as the user named it; `kind`: what it should be, for the message
  // ("a memscope run recording, written by 'memscope run --json'").
  JsonSource(std::string source, std::string kind);

  // "{source}: field '{path}' {problem} ({kind})"; an empty path is the document itself.
  [[noreturn]] void fail(const std::string& path, std::string_view problem) const;
  [[nodiscard]] const std::string& source() const noexcept { return source_; }
  [[nodiscard]] const std::string& kind() const noexcept { return kind_; }

  // Checks of a value found at `path` (an array's element, say).
  [[nodiscard]] double number_or_nan(const nlohmann::json& value, const std::string& path) const;
  [[nodiscard]] std::vector<std::string> texts(const nlohmann::json& list,
                                               const std::string& path) const;

 private:
  std::string source_;
  std::string kind_;
};

// "path[i]", "path.key" (just "key" at the top).
[[nodiscard]] std::string json_element_path(const std::string& path, std::size_t i);
[[nodiscard]] std::string json_member_path(const std::string& path, std::string_view key);

class JsonObject {
 public:
  // Throws unless `value` is an object. `path`: "" for the document itself.
  JsonObject(const JsonSource& source, const nlohmann::json& value, std::string path);

  [[nodiscard]] std::string path_of(std::string_view key) const;
  [[noreturn]] void fail(std::string_view key, std::string_view problem) const;
  [[nodiscard]] const JsonSource& source() const noexcept { return *source_; }
  [[nodiscard]] const nlohmann::json& json() const noexcept { return *value_; }
  // Where the object sits in its file: "" for the document itself, "report" inside a replay.
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

  // Present and not null.
  [[nodiscard]] bool has(const char* key) const;
  // Present (any type, null included).
  [[nodiscard]] const nlohmann::json& at(const char* key) const;

  [[nodiscard]] std::string text(const char* key) const;
  [[nodiscard]] bool boolean(const char* key) const;
  [[nodiscard]] std::int64_t integer(const char* key) const;
  [[nodiscard]] int small_int(const char* key) const;  // fits an int
  // Absent or null: nullopt.
  [[nodiscard]] std::optional<int> optional_small_int(const char* key) const;
  [[nodiscard]] std::uint64_t unsigned_integer(const char* key) const;  // 0 or more
  [[nodiscard]] double number(const char* key) const;                   // null refused
  [[nodiscard]] double number_or_nan(const char* key) const;  // null (a non-finite number) -> NaN

  [[nodiscard]] const nlohmann::json& array(const char* key) const;
  [[nodiscard]] std::vector<std::string> texts(const char* key) const;
  [[nodiscard]] std::vector<double> numbers(const char* key) const;
  [[nodiscard]] std::vector<double> numbers_or_nan(const char* key) const;
  [[nodiscard]] std::vector<std::int64_t> integers(const char* key) const;
  // An object of integers; absent or null: empty.
  [[nodiscard]] std::map<std::string, std::int64_t> integer_map(const char* key) const;

  [[nodiscard]] JsonObject object(const char* key) const;
  // Each element of the array `key`, which must be an object, at "key[i]".
  [[nodiscard]] std::vector<JsonObject> objects(const char* key) const;

 private:
  const JsonSource* source_;
  const nlohmann::json* value_;
  std::string path_;
};

}  // namespace memscope::report
