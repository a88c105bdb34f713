// The whole content of a trace file, for the readers that take bytes.
#pragma once

#include <filesystem>
#include <string>

namespace memscope::detail {

// Reads the file at once; a file that cannot be read is a TraceFormatError naming it and why.
[[nodiscard]] std::string read_file_bytes(const std::filesystem::path& path);

}  // namespace memscope::detail
