// Runs a shell command and returns what it printed (trailing newlines removed), or "" when it
// could not run or failed: the benchmarks' way to ask a Python peer for its figures.
#pragma once

#include <cstdio>
#include <string>

namespace memscope::bench {

inline std::string run_command(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");  // NOLINT(cert-env33-c): the bench's own peer script
  if (pipe == nullptr) return "";
  std::string out;
  char buffer[256];
  while (fgets(buffer, sizeof buffer, pipe) != nullptr) out += buffer;
  if (pclose(pipe) != 0) return "";
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

}  // namespace memscope::bench
