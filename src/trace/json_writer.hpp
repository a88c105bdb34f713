// A streaming JSON emitter with the PickleWriter's interface, so one walk of a snapshot writes
// either format (snapshot_writer.cpp). Compact output (no spaces), strings as UTF-8 with invalid
// sequences replaced by U+FFFD, a pair as a two-item array. JSON cannot share objects, so a
// shared container is written out each time; its text is kept when first written and copied
// for each later fetch() (a stack of frames is rendered once).
//
// Thread safety: one writer per thread. Errors: UsageError from finish() while a container
// still expects values.
#pragma once

#include <array>
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
  void literal(const char* value) { text(value); }
  void pair(std::int64_t a, std::int64_t b);
  void begin_list(std::size_t items) { open(false, items); }
  void begin_dict(std::size_t items) { open(true, 2 * items); }
  [[nodiscard]] bool fetch(unsigned kind, std::uint32_t id);
  void share(unsigned kind, std::uint32_t id);
  void reserve(std::size_t bytes) { out_.reserve(bytes); }
  [[nodiscard]] std::string finish();

 private:
  struct Open {
    bool object;
    std::size_t values;  // a dict: keys and values
    std::size_t done;
    std::string* keep = nullptr;  // where its text goes when it closes (a shared container)
    std::size_t start = 0;        // its first byte in out_
  };
  void before_value();
  void after_value();
  void scalar(std::string_view literal);
  void open(bool object, std::size_t values);

  std::string out_;
  std::vector<Open> open_;
  std::array<std::vector<std::string>, 4> shared_;  // [kind][id]: the text, or empty
  std::string* pending_ = nullptr;                  // set by share() for the next container
};

}  // namespace memscope::detail
