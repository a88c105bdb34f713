// read_trace_file(): tells a PyTorch snapshot pickle, a JSON snapshot and an RMM log apart by
// their first bytes (never by the file name) and reads the file with the matching reader.
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>

#include "memscope/errors.hpp"
#include "memscope/trace.hpp"

namespace memscope {
namespace {

constexpr const char* kAccepted =
    "memscope reads a PyTorch memory snapshot pickle (torch.cuda.memory._dump_snapshot; first "
    "byte 0x80, or a protocol-0 pickle), a JSON snapshot (first character '{' or '['), or an "
    "RMM allocation log (a CSV whose first line is Thread,Time,Action,Pointer,Size,Stream)";

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

// Opcodes a protocol 0 or 1 pickle can start with: a mark, an empty container, or a scalar.
// GLOBAL ('c') and INST ('i') are included so that such a pickle is refused by the reader with
// its own message, not called unknown.
bool starts_protocol0_pickle(char c) {
  constexpr std::string_view kFirst = "(]})NIJKLMFGSTUVXBCcid";
  return kFirst.find(c) != std::string_view::npos;
}

// The first line of text data, at most 60 bytes, for messages.
std::string first_line(std::string_view data) {
  const std::string_view line = data.substr(0, std::min(data.find('\n'), std::size_t{60}));
  std::string out;
  for (const char c : line) out += std::isprint(static_cast<unsigned char>(c)) != 0 ? c : '?';
  return out;
}

// Python source (a script given where a trace belongs): its first line starts as Python's
// usually do. A protocol-0 pickle starts with an opcode letter and its data, never a keyword
// and a space, so no pickle is taken for source.
bool looks_like_python(std::string_view data) {
  static constexpr std::array<std::string_view, 9> kStarts = {
      "#!", "# ", "import ", "from ", "def ", "class ", "\"\"\"", "'''", "@"};
  return std::any_of(kStarts.begin(), kStarts.end(),
                     [&](std::string_view s) { return data.starts_with(s); });
}

// Printable text in its first 4 KiB (UTF-8 bytes count as text).
bool looks_like_text(std::string_view data) {
  const std::string_view head = data.substr(0, 4096);
  return std::all_of(head.begin(), head.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u >= 0x20 && u != 0x7F) || c == '\n' || c == '\r' || c == '\t';
  });
}

}  // namespace

TraceFormat detect_trace_format(std::string_view data) noexcept {
  if (data.empty()) return TraceFormat::unknown;
  if (static_cast<unsigned char>(data[0]) == 0x80) return TraceFormat::pickle;
  std::string_view text = data;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // a UTF-8 byte order mark
  std::size_t i = 0;
  while (i < text.size() && is_space(text[i])) ++i;
  if (i < text.size() && (text[i] == '{' || text[i] == '[')) return TraceFormat::json;
  // The RMM header; its first column may be quoted.
  std::string_view rest = text.substr(i);
  if (!rest.empty() && rest.front() == '"') rest.remove_prefix(1);
  if (rest.size() >= 6) {
    std::string word(rest.substr(0, 6));
    for (char& c : word) c = static_cast<char>(c | 0x20);
    if (word == "thread") return TraceFormat::rmm_log;
  }
  if (starts_protocol0_pickle(data[0])) return TraceFormat::pickle;
  return TraceFormat::unknown;
}

TorchSnapshot read_trace_file(const std::filesystem::path& path) {
  return read_trace(read_whole_file(path), path.string());
}

TorchSnapshot read_trace(std::string_view data, std::string_view source_name) {
  const std::string source(source_name);
  if (looks_like_python(data)) {
    throw TraceFormatError(source + ": not a trace: it looks like Python source (first line '" +
                           first_line(data) + "'); " + kAccepted);
  }
  switch (detect_trace_format(data)) {
    case TraceFormat::pickle:
      return read_torch_snapshot_pickle(data, source);  // no PickleValue: twice as fast
    case TraceFormat::json:
      return read_torch_snapshot_json(data, source);
    case TraceFormat::rmm_log:
      return read_rmm_log(data, source);
    case TraceFormat::unknown:
      break;
  }
  if (data.empty()) throw TraceFormatError(source + ": the file is empty; " + kAccepted);
  if (looks_like_text(data)) {
    throw TraceFormatError(source + ": not a trace: it looks like text (first line '" +
                           first_line(data) + "'); " + kAccepted);
  }
  std::string first;
  for (const char c : std::string_view(data).substr(0, 8)) {
    static constexpr char kHex[] = "0123456789abcdef";
    const auto u = static_cast<unsigned char>(c);
    if (!first.empty()) first += ' ';
    first += kHex[u >> 4];
    first += kHex[u & 15];
  }
  throw TraceFormatError(source +
                         ": not a trace: binary data of no format memscope knows (first "
                         "bytes " +
                         first + "); " + kAccepted);
}

}  // namespace memscope
