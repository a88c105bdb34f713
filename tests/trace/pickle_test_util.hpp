// Helpers for hand-written pickles in the trace tests: raw bytes, little-endian fields, and the
// message of the TraceFormatError an action throws.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "memscope/errors.hpp"
#include "memscope/pickle.hpp"

namespace memscope::testing {

inline std::string bytes(std::initializer_list<unsigned> values) {
  std::string out;
  for (const unsigned v : values) out.push_back(static_cast<char>(v));
  return out;
}

// `n` bytes of `value`, little-endian.
inline std::string le(std::uint64_t value, int n) {
  std::string out;
  for (int i = 0; i < n; ++i, value >>= 8) out.push_back(static_cast<char>(value & 0xFF));
  return out;
}

// Concatenation that always appends (GCC 12 warns falsely, -Wrestrict, about "literal" + string).
template <class... Parts>
std::string cat(const Parts&... parts) {
  std::string out;
  (out.append(std::string_view(parts)), ...);
  return out;
}

// The protocol-2 header and STOP around `body`.
inline std::string p2(std::string_view body) {
  return bytes({0x80, 2}) + std::string(body) + ".";
}

// The message of the TraceFormatError `action` throws; "" (and a test failure) when it returns
// or throws anything else.
template <class F>
std::string format_error(F&& action) {
  try {
    action();
  } catch (const TraceFormatError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a TraceFormatError: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no error";
  return "";
}

// The message of the TraceFormatError read_pickle(data) throws.
inline std::string pickle_error(std::string_view data, std::string_view source = "<memory>",
                                const PickleLimits& limits = {}) {
  return format_error([&] { (void)read_pickle(data, source, limits); });
}

inline PickleValue str(std::string s) {
  return PickleValue{std::move(s)};
}
inline PickleValue num(std::int64_t v) {
  return PickleValue{v};
}

// A dict of str keys, in order, and a list: PyTorch snapshots built by hand.
inline PickleValue dict(const std::vector<std::pair<const char*, PickleValue>>& fields) {
  std::vector<PickleDict::Item> items;
  items.reserve(fields.size());
  for (const auto& [k, v] : fields) items.emplace_back(str(k), v);
  return PickleValue{PickleDict(std::move(items))};
}
inline PickleValue list(std::vector<PickleValue> items) {
  return PickleValue{PickleList(std::move(items))};
}

}  // namespace memscope::testing
