#include "trace/read_file.hpp"

#include <cstdint>
#include <fstream>
#include <system_error>

#include "memscope/errors.hpp"

namespace memscope::detail {

std::string read_file_bytes(const std::filesystem::path& path) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw TraceFormatError("cannot read " + path.string() + ": " + ec.message());
  std::string data(static_cast<std::size_t>(size), '\0');
  std::ifstream in(path, std::ios::binary);
  if (!in.read(data.data(), static_cast<std::streamsize>(data.size()))) {
    throw TraceFormatError("cannot read " + path.string() + ": the read failed");
  }
  return data;
}

}  // namespace memscope::detail
