// The choices below follow CPython's C pickler (Modules/_pickle.c) as observed through
// pickle.dumps, so the bytes match Python's; tests/trace/writer_test.cpp and
// python/tests/test_viewer.py hold the writer to that.
#include "trace/pickle_writer.hpp"

#include <string>

#include "common/utf8.hpp"
#include "memscope/errors.hpp"
#include "trace/pickle_opcodes.hpp"

namespace memscope::detail {
namespace {

constexpr std::size_t kBatch = 1000;         // items per MARK ... APPENDS/SETITEMS
constexpr std::size_t kFrameTarget = 65536;  // a frame closes once it holds 64 KiB
constexpr std::size_t kFrameMin = 4;         // smaller frames are written unframed
constexpr std::size_t kFrameHeader = 9;      // FRAME + 8-byte length

std::uint8_t op(Op o) {
  return static_cast<std::uint8_t>(o);
}

}  // namespace

PickleWriter::PickleWriter(int protocol) : protocol_(protocol) {
  if (protocol < 2 || protocol > 4) {
    throw UsageError("pickle protocol " + std::to_string(protocol) +
                     " is not supported for snapshots: use 2, 3 or 4 (PyTorch's memory viewer "
                     "reads nothing newer than 4)");
  }
  out_.push_back(static_cast<char>(op(Op::kProto)));
  out_.push_back(static_cast<char>(protocol));  // before the first frame, as Python writes it
}

void PickleWriter::open_frame() {
  frame_start_ = static_cast<std::ptrdiff_t>(out_.size());
  out_.append(kFrameHeader, '\0');  // filled in by commit_frame()
}

void PickleWriter::put(const void* data, std::size_t size) {
  if (protocol_ >= 4 && frame_start_ < 0) open_frame();
  out_.append(static_cast<const char*>(data), size);
}

void PickleWriter::little_endian(std::uint64_t value, int bytes) {
  char buf[8];
  for (int i = 0; i < bytes; ++i) buf[i] = static_cast<char>((value >> (8 * i)) & 0xFF);
  put(buf, static_cast<std::size_t>(bytes));
}

void PickleWriter::commit_frame() {
  if (frame_start_ < 0) return;
  const auto start = static_cast<std::size_t>(frame_start_);
  const std::size_t length = out_.size() - start - kFrameHeader;
  if (length >= kFrameMin) {
    out_[start] = static_cast<char>(op(Op::kFrame));
    for (std::size_t i = 0; i < 8; ++i) {
      out_[start + 1 + i] = static_cast<char>((length >> (8 * i)) & 0xFF);
    }
  } else {
    out_.erase(start, kFrameHeader);
  }
  frame_start_ = -1;
}

void PickleWriter::before_value() {
  if (!open_.empty()) {
    const Open& top = open_.back();
    const std::size_t per_item = top.dict ? 2 : 1;
    const std::size_t items = top.values / per_item;
    if (items > 1 && top.done % (kBatch * per_item) == 0) byte(op(Op::kMark));
  }
  frame_boundary();
}

void PickleWriter::frame_boundary() {
  if (frame_start_ >= 0 &&
      out_.size() - static_cast<std::size_t>(frame_start_) - kFrameHeader >= kFrameTarget) {
    commit_frame();
  }
}

void PickleWriter::after_value() {
  while (!open_.empty()) {
    Open& top = open_.back();
    ++top.done;
    const std::size_t per_item = top.dict ? 2 : 1;
    if (top.done % per_item != 0) return;  // a key: its value comes next
    const std::size_t items = top.values / per_item;
    const std::size_t item = top.done / per_item;
    if (items == 1) {
      byte(op(top.dict ? Op::kSetitem : Op::kAppend));
    } else if (item % kBatch == 0 || item == items) {
      byte(op(top.dict ? Op::kSetitems : Op::kAppends));
      // Python's dict loop starts one more (empty) batch after a full one.
      if (top.dict && item == items && items % kBatch == 0) {
        byte(op(Op::kMark));
        byte(op(Op::kSetitems));
      }
    }
    if (top.done < top.values) return;
    open_.pop_back();  // complete: it was a value of its parent
  }
}

void PickleWriter::memoize(std::uint32_t* index_out) {
  const std::uint32_t index = memo_size_++;
  if (index_out != nullptr) *index_out = index;
  if (protocol_ >= 4) {
    byte(op(Op::kMemoize));
  } else if (index < 256) {
    byte(op(Op::kBinput));
    byte(static_cast<std::uint8_t>(index));
  } else {
    byte(op(Op::kLongBinput));
    little_endian(index, 4);
  }
}

void PickleWriter::get(std::uint32_t index) {
  if (index < 256) {
    byte(op(Op::kBinget));
    byte(static_cast<std::uint8_t>(index));
  } else {
    byte(op(Op::kLongBinget));
    little_endian(index, 4);
  }
}

void PickleWriter::none() {
  before_value();
  byte(op(Op::kNone));
  after_value();
}

void PickleWriter::boolean(bool value) {
  before_value();
  byte(op(value ? Op::kNewtrue : Op::kNewfalse));
  after_value();
}

void PickleWriter::integer(std::int64_t value) {
  before_value();
  raw_integer(value);
  after_value();
}

void PickleWriter::raw_integer(std::int64_t value) {
  if (value >= 0 && value <= 0xFF) {
    byte(op(Op::kBinint1));
    byte(static_cast<std::uint8_t>(value));
  } else if (value >= 0 && value <= 0xFFFF) {
    byte(op(Op::kBinint2));
    little_endian(static_cast<std::uint64_t>(value), 2);
  } else if (value >= -0x80000000LL && value <= 0x7FFFFFFF) {
    byte(op(Op::kBinint));
    little_endian(static_cast<std::uint64_t>(value), 4);
  } else {
    // LONG1: the shortest two's complement that keeps the sign, as Python encodes it.
    const auto bits = static_cast<std::uint64_t>(value);
    int bytes = 8;
    while (bytes > 1) {
      const auto top = static_cast<std::uint8_t>(bits >> (8 * (bytes - 1)));
      const auto next = static_cast<std::uint8_t>(bits >> (8 * (bytes - 2)));
      const bool redundant =
          value < 0 ? (top == 0xFF && (next & 0x80) != 0) : (top == 0x00 && (next & 0x80) == 0);
      if (!redundant) break;
      --bytes;
    }
    byte(op(Op::kLong1));
    byte(static_cast<std::uint8_t>(bytes));
    little_endian(bits, bytes);
  }
}

void PickleWriter::natural(std::uint64_t value) {
  if (value <= static_cast<std::uint64_t>(INT64_MAX)) {
    integer(static_cast<std::int64_t>(value));
    return;
  }
  before_value();  // 2^63 and above: eight bytes and a zero sign byte
  byte(op(Op::kLong1));
  byte(9);
  little_endian(value, 8);
  byte(0);
  after_value();
}

void PickleWriter::big_payload(std::string_view header, std::string_view payload) {
  // Python writes a payload of a frame's size or more outside any frame.
  if (protocol_ >= 4) {
    commit_frame();
    out_.append(header);
    out_.append(payload);
  } else {
    put(header.data(), header.size());
    put(payload.data(), payload.size());
  }
}

void PickleWriter::text(std::string_view value) {
  (void)text_index(value);
}

void PickleWriter::literal(const char* value) {
  auto& slot =
      literal_cache_[(reinterpret_cast<std::uintptr_t>(value) >> 3) % literal_cache_.size()];
  if (slot.first == value) {
    before_value();
    get(slot.second);
    after_value();
    return;
  }
  const auto it = literals_.find(value);
  if (it != literals_.end()) {
    before_value();
    get(it->second);
    after_value();
  } else {
    literals_.emplace(value, text_index(value));
  }
  slot = {value, literals_.at(value)};
}

std::uint32_t PickleWriter::text_index(std::string_view value) {
  std::string fixed;
  const std::string_view utf8 = as_valid_utf8(value, fixed);
  before_value();
  if (const auto it = strings_.find(utf8); it != strings_.end()) {
    get(it->second);
    after_value();
    return it->second;
  }
  const std::size_t n = utf8.size();
  if (protocol_ >= 4 && n <= 0xFF) {
    byte(op(Op::kShortBinunicode));
    byte(static_cast<std::uint8_t>(n));
    put(utf8.data(), n);
  } else {
    std::string header;
    const bool eight = protocol_ >= 4 && n > 0xFFFFFFFFULL;
    header += static_cast<char>(op(eight ? Op::kBinunicode8 : Op::kBinunicode));
    for (int i = 0; i < (eight ? 8 : 4); ++i) header += static_cast<char>((n >> (8 * i)) & 0xFF);
    if (n >= kFrameTarget) {
      big_payload(header, utf8);
    } else {
      put(header.data(), header.size());
      put(utf8.data(), n);
    }
  }
  std::uint32_t index = 0;
  memoize(&index);
  strings_.emplace(std::string(utf8), index);
  after_value();
  return index;
}

void PickleWriter::pair(std::int64_t a, std::int64_t b) {
  before_value();
  raw_integer(a);  // Python saves each item as a value: a frame may close before either
  frame_boundary();
  raw_integer(b);
  byte(op(Op::kTuple2));
  memoize();
  after_value();
}

bool PickleWriter::fetch(unsigned kind, std::uint32_t id) {
  const std::vector<std::uint32_t>& known = shared_.at(kind);
  if (id >= known.size() || known[id] == 0) return false;
  before_value();
  get(known[id] - 1);
  after_value();
  return true;
}

void PickleWriter::share(unsigned kind, std::uint32_t id) {
  if (kind >= shared_.size()) throw UsageError("PickleWriter::share: kind 0 to 3");
  pending_kind_ = kind;
  pending_id_ = id;
  has_pending_share_ = true;
}

void PickleWriter::begin_container(std::size_t values, bool dict) {
  before_value();
  byte(op(dict ? Op::kEmptyDict : Op::kEmptyList));
  std::uint32_t index = 0;
  memoize(&index);
  if (has_pending_share_) {
    std::vector<std::uint32_t>& known = shared_[pending_kind_];
    if (pending_id_ >= known.size()) known.resize(std::size_t{pending_id_} + 1, 0);
    known[pending_id_] = index + 1;
    has_pending_share_ = false;
  }
  if (values == 0) {
    after_value();
    return;
  }
  open_.push_back({values, 0, dict});
}

void PickleWriter::begin_list(std::size_t items) {
  begin_container(items, false);
}
void PickleWriter::begin_dict(std::size_t items) {
  begin_container(2 * items, true);
}

std::string PickleWriter::finish() {
  if (!open_.empty()) {
    throw UsageError("PickleWriter::finish: a container still expects " +
                     std::to_string(open_.back().values - open_.back().done) + " values");
  }
  byte(op(Op::kStop));
  commit_frame();
  return std::move(out_);
}

}  // namespace memscope::detail
