// A streaming JSON emitter with the PickleWriter's interface, so one walk of a snapshot writes
// either format (snapshot_writer.cpp). Compact output (no spaces), strings as UTF-8 with invalid
// sequences replaced by U+FFFD, a pair as a two-item array. JSON cannot share objects: fetch()
// always answers false, so shared containers are written out each time.
//
// Thread safety: one writer per thread. Errors: UsageError from finish() while a container
// still expects values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace memscope::detail {

class JsonWriter {
 public:
  void none() { scalar("null"); }
  void boolean(bool value) { scalar(value ? "true" : "false"); }
  void integer(std::int64_t value);
  void natural(std::uint64_t value);
  void text(std::string_view value);
  void pair(std::int64_t a, std::int64_t b);
  void begin_list(std::size_t items) { open(false, items); }
  void begin_dict(std::size_t items) { open(true, 2 * items); }
  [[nodiscard]] static bool fetch(std::uint64_t /*key*/) { return false; }
  void share(std::uint64_t /*key*/) {}
  [[nodiscard]] std::string finish();

 private:
  struct Open {
    bool object;
    std::size_t values;  // a dict: keys and values
    std::size_t done;
  };
  void before_value();
  void after_value();
  void scalar(std::string_view literal);
  void open(bool object, std::size_t values);

  std::string out_;
  std::vector<Open> open_;
};

}  // namespace memscope::detail
