// JSON snapshots: the same dict as the pickle (PyTorch's viewer reads both), parsed with
// nlohmann's SAX interface straight into a PickleValue, then read by read_torch_snapshot(), so
// both formats share one reader and one set of error messages.
//
// Bounded like the pickle reader: nesting is limited (so neither building nor destroying the
// value can exhaust the stack) and so is the memory built per input byte. Numbers beyond int64,
// non-finite floats and duplicate keys are typed errors naming the key path.
#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "memscope/errors.hpp"
#include "memscope/trace.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

constexpr std::size_t kMaxDepth = 200;  // as PickleLimits::max_depth
constexpr std::size_t kBaseBudget = 64 * MiB;
constexpr std::size_t kBudgetPerInputByte = 128;
constexpr std::size_t kValueBytes = sizeof(PickleValue) + 16;  // a slot, roughly
constexpr std::size_t kContainerBytes = 64;                    // shared vector and control
constexpr std::size_t kIndexedKeys = 16;  // objects with more keys find duplicates by hashing

class ValueBuilder : public nlohmann::json_sax<nlohmann::json> {
 public:
  ValueBuilder(std::string_view source, std::size_t budget) : source_(source), budget_(budget) {}

  [[nodiscard]] PickleValue take() { return std::move(root_); }

  bool null() override { return add(PickleValue{}); }
  bool boolean(bool v) override { return add(PickleValue{v}); }
  bool number_integer(number_integer_t v) override { return add(PickleValue{std::int64_t{v}}); }
  bool number_unsigned(number_unsigned_t v) override {
    if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return add(PickleValue{PickleBigInt{std::to_string(v)}});  // as the pickle reader keeps it
    }
    return add(PickleValue{static_cast<std::int64_t>(v)});
  }
  bool number_float(number_float_t v, const string_t& text) override {
    // nlohmann refuses overflow itself; this guards against any other path to inf or nan.
    if (!std::isfinite(v)) fail("number " + text + " is not finite");
    return add(PickleValue{v});
  }
  bool string(string_t& v) override {
    charge(v.size());
    return add(PickleValue{std::move(v)});
  }
  bool binary(binary_t& /*v*/) override {
    fail("binary values are not JSON");  // only the binary formats produce them
  }
  bool start_object(std::size_t /*elements*/) override { return open(true); }
  bool key(string_t& k) override {
    charge(k.size());
    Open& o = stack_.back();
    o.key = std::move(k);
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t /*elements*/) override { return open(false); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t position, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& ex) override {
    std::string what = ex.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..." -> from "parse".
    if (const std::size_t at = what.find("] "); at != std::string::npos) what.erase(0, at + 2);
    throw TraceFormatError(source_ + ": not valid JSON at byte " + std::to_string(position) + ": " +
                           what);
  }

 private:
  struct Open {
    bool is_dict = false;
    std::vector<PickleValue> items;
    std::vector<PickleDict::Item> entries;
    std::string key;
    std::unordered_map<std::string, std::size_t> index;  // only past kIndexedKeys keys
  };

  [[noreturn]] void fail(const std::string& problem) const {
    throw TraceFormatError(source_ + ": " + path() + ": " + problem);
  }
  // Where the next value goes: "device_traces[0][3].size", or "the document".
  [[nodiscard]] std::string path() const {
    std::string out;
    for (const Open& o : stack_) {
      if (o.is_dict) {
        if (!out.empty()) out += '.';
        out += o.key;
      } else {
        out += "[" + std::to_string(o.items.size()) + "]";
      }
    }
    return out.empty() ? std::string("the document") : out;
  }
  void charge(std::size_t bytes) {
    if (bytes > budget_ - used_) {
      fail("the document would take more than " + std::to_string(budget_) +
           " bytes of memory to hold");
    }
    used_ += bytes;
  }
  bool open(bool is_dict) {
    if (stack_.size() >= kMaxDepth) {
      fail("containers nest deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    charge(kContainerBytes);
    stack_.emplace_back().is_dict = is_dict;
    return true;
  }
  bool close() {
    Open o = std::move(stack_.back());
    stack_.pop_back();
    if (o.is_dict) return add(PickleValue{PickleDict(std::move(o.entries))});
    return add(PickleValue{PickleList(std::move(o.items))});
  }
  bool add(PickleValue v) {
    charge(kValueBytes);
    if (stack_.empty()) {
      root_ = std::move(v);
      return true;
    }
    Open& o = stack_.back();
    if (!o.is_dict) {
      o.items.push_back(std::move(v));
      return true;
    }
    if (is_duplicate(o)) fail("the key appears twice in one object");
    o.entries.emplace_back(PickleValue{o.key}, std::move(v));
    return true;
  }
  // Whether o.key is already a key of o (recording it when not). Linear for small objects, as
  // events and frames are; hashed for large ones, so a hostile object stays linear in its size.
  static bool is_duplicate(Open& o) {
    if (o.entries.size() < kIndexedKeys) {
      for (const auto& [k, v] : o.entries) {
        if (*k.get_if<std::string>() == o.key) return true;
      }
      return false;
    }
    if (o.index.empty()) {
      for (std::size_t i = 0; i < o.entries.size(); ++i) {
        o.index.emplace(*o.entries[i].first.get_if<std::string>(), i);
      }
    }
    return !o.index.emplace(o.key, o.entries.size()).second;
  }

  std::string source_;
  std::size_t budget_;
  std::size_t used_ = 0;
  std::vector<Open> stack_;
  PickleValue root_;
};

}  // namespace

TorchSnapshot read_torch_snapshot_json(std::string_view json, std::string_view source) {
  ValueBuilder builder(source, kBaseBudget + kBudgetPerInputByte * json.size());
  // Strict: anything but white space after the document is an error.
  if (!nlohmann::json::sax_parse(json, &builder, nlohmann::json::input_format_t::json, true)) {
    throw TraceFormatError(std::string(source) + ": not valid JSON");  // parse_error threw first
  }
  return read_torch_snapshot(builder.take(), source);
}

}  // namespace memscope
