// A pickle emitter for plain data (None, bool, int, str, list, dict, a pair of ints), protocols 2
// to 4, writing exactly the bytes CPython's pickle.dumps writes for the same object graph: the
// same opcodes per value, the same memo (every str and container is memoized; a str written
// twice is written once and fetched from the memo, as is any container the caller shares), the
// same batches of 1000 and, for protocol 4, the same 64 KiB frames. So Python, PyTorch's viewer
// (MemoryViz.js, whose unpickler knows only the opcodes Python emits for plain data) and
// memscope's own reader all read it, and `pickle.dumps(pickle.loads(b), protocol=p) == b`.
//
// Use: announce each container with its entry count, then write its entries (a dict: key,
// value, key, value...). Containers close themselves after their last entry.
// Thread safety: one writer per thread. Errors: UsageError for a protocol outside 2..4 and for
// misuse (finish() with a container still open).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace memscope::detail {

class PickleWriter {
 public:
  explicit PickleWriter(int protocol);

  void none();
  void boolean(bool value);
  void integer(std::int64_t value);
  void natural(std::uint64_t value);
  // A str; its bytes are written as UTF-8, any invalid sequence replaced by U+FFFD (Python
  // refuses invalid UTF-8). Equal strings share one memo entry.
  void text(std::string_view value);
  // A str whose bytes stay valid and unchanged at this address while the writer lives (a string
  // literal, a static name): found again by its address, without hashing its bytes.
  void literal(const char* value);
  // The tuple (a, b).
  void pair(std::int64_t a, std::int64_t b);
  void begin_list(std::size_t items);
  void begin_dict(std::size_t items);

  // Shared containers, named by a kind (0 to 3) and an id: when a container was begun under that
  // name before, fetch() writes a memo reference to it (counting as one value) and returns true.
  // Otherwise call share() and then begin the container: it is remembered under the name.
  [[nodiscard]] bool fetch(unsigned kind, std::uint32_t id);
  void share(unsigned kind, std::uint32_t id);

  // The pickle (STOP written, last frame closed). The writer is spent afterwards.
  [[nodiscard]] std::string finish();
  void reserve(std::size_t bytes) { out_.reserve(bytes); }

 private:
  struct Open {
    std::size_t values;  // values it takes (a dict: two per item)
    std::size_t done;
    bool dict;
  };
  void before_value();  // MARK when a batch starts, then the frame boundary
  void frame_boundary();
  void raw_integer(std::int64_t value);
  std::uint32_t text_index(std::string_view value);  // text(); returns its memo index
  void after_value();
  void begin_container(std::size_t values, bool dict);
  void memoize(std::uint32_t* index_out = nullptr);
  void get(std::uint32_t index);
  void put(const void* data, std::size_t size);
  void byte(std::uint8_t b) {
    if (protocol_ >= 4 && frame_start_ < 0) open_frame();
    out_.push_back(static_cast<char>(b));
  }
  void open_frame();
  void little_endian(std::uint64_t value, int bytes);
  void commit_frame();
  void big_payload(std::string_view header, std::string_view payload);

  int protocol_;
  std::string out_;
  std::ptrdiff_t frame_start_ = -1;  // where the current frame's 9-byte header is, or -1
  std::uint32_t memo_size_ = 0;
  struct TextHash {  // lets strings_ be searched with a string_view
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  std::unordered_map<std::string, std::uint32_t, TextHash, std::equal_to<>> strings_;
  // Literals by address: a direct-mapped cache in front of the map (a snapshot has ~30).
  std::array<std::pair<const char*, std::uint32_t>, 64> literal_cache_{};
  std::unordered_map<const char*, std::uint32_t> literals_;
  std::array<std::vector<std::uint32_t>, 4> shared_;  // [kind][id]: memo index + 1, or 0
  unsigned pending_kind_ = 0;
  std::uint32_t pending_id_ = 0;
  bool has_pending_share_ = false;
  std::vector<Open> open_;
};

}  // namespace memscope::detail
