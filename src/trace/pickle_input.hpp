// PickleInput: bounded reads of a pickle's bytes, and the problem type the reader's helpers throw.
//
// Every read checks the remaining input first, so a length field larger than the file is
// refused before anything is allocated for it; the reader turns a PickleProblem into a
// TraceFormatError that names the file, the opcode and its offset.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

namespace memscope::detail {

// What went wrong, without the where: the reader adds the source, the opcode and the offset.
class PickleProblem : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class PickleInput {
 public:
  explicit PickleInput(std::string_view data) noexcept : data_(data) {}

  [[nodiscard]] std::size_t offset() const noexcept { return pos_; }
  [[nodiscard]] std::size_t remaining() const noexcept { return data_.size() - pos_; }
  [[nodiscard]] bool at_end() const noexcept { return pos_ == data_.size(); }

  // `n` raw bytes; the view points into the input.
  [[nodiscard]] std::string_view bytes(std::uint64_t n) {
    if (n > remaining()) truncated(n);
    const std::string_view out(data_.data() + pos_, static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return out;
  }
  // The next byte (an opcode); the caller checks at_end() first.
  [[nodiscard]] std::uint8_t next_byte() noexcept {
    return static_cast<std::uint8_t>(data_[pos_++]);
  }

  // An unsigned little-endian integer of `n` bytes (1 <= n <= 8).
  [[nodiscard]] std::uint64_t uint_le(std::size_t n) {
    const std::string_view raw = bytes(n);
    std::uint64_t value = 0;
    for (std::size_t i = n; i-- > 0;) {
      value = (value << 8) | static_cast<std::uint8_t>(raw[i]);
    }
    return value;
  }

  [[nodiscard]] std::int32_t int32_le() {
    return static_cast<std::int32_t>(static_cast<std::uint32_t>(uint_le(4)));
  }

  // BINFLOAT: an IEEE 754 double, big-endian.
  [[nodiscard]] double float_be() {
    const std::string_view raw = bytes(8);
    std::uint64_t bits = 0;
    for (const char c : raw) bits = (bits << 8) | static_cast<std::uint8_t>(c);
    return std::bit_cast<double>(bits);
  }

  // The text up to the next '\n' (protocol 0 arguments), without the newline.
  [[nodiscard]] std::string_view line() {
    const std::size_t end = data_.find('\n', pos_);
    if (end == std::string_view::npos) {
      throw PickleProblem("its argument has no terminating newline (truncated input)");
    }
    const std::string_view out = data_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return out;
  }

 private:
  // Out of line: keeps the message building off the hot path of every read.
  [[noreturn]] [[gnu::noinline, gnu::cold]] void truncated(std::uint64_t n) const {
    throw PickleProblem("its argument needs " + std::to_string(n) + " bytes but only " +
                        std::to_string(remaining()) + " remain (truncated or corrupt input)");
  }

  std::string_view data_;
  std::size_t pos_ = 0;
};

}  // namespace memscope::detail
