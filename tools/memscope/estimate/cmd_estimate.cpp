// memscope estimate SCRIPT.py:FUNCTION [--batch N] [--capacity SIZE] [--max-batch] [--json PATH]
// [--html PATH] ...: a training step's GPU memory estimated without a GPU. The capture needs
// PyTorch, so this subcommand is the Python module's front door: it execs
// `python3 -m memscope.estimate` with every argument as given (docs/estimate.md), after
// putting this build's Python package on PYTHONPATH when there is one next to the command and
// naming the command in MEMSCOPE_EXE (the module renders --html through `memscope replay`).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "cli.hpp"
#include "commands.hpp"

namespace memscope::cli {
namespace {

namespace fs = std::filesystem;

// The build tree's package: <build>/tools/memscope/memscope -> <build>/python/memscope.
void use_build_tree_package(const fs::path& exe) {
  std::error_code ec;
  const fs::path python = fs::weakly_canonical(exe.parent_path() / ".." / ".." / "python", ec);
  if (ec || !fs::exists(python / "memscope" / "__init__.py", ec)) return;
  // The command is one thread here, about to exec: getenv/setenv race with nothing.
  const char* old = std::getenv("PYTHONPATH");  // NOLINT(concurrency-mt-unsafe)
  const std::string value =
      python.string() + (old != nullptr && *old != '\0' ? ":" + std::string(old) : "");
  ::setenv("PYTHONPATH", value.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
}

int exec_python(const std::vector<std::string>& args) {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    use_build_tree_package(exe);
    ::setenv("MEMSCOPE_EXE", exe.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
  }
  const char* env_python = std::getenv("MEMSCOPE_PYTHON");  // NOLINT(concurrency-mt-unsafe)
  const std::string python = env_python != nullptr && *env_python != '\0' ? env_python : "python3";
  std::vector<std::string> argv_strings{python, "-m", "memscope.estimate"};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  argv.reserve(argv_strings.size() + 1);
  for (std::string& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execvp(python.c_str(), argv.data());
  const int err = errno;  // execvp returns only on failure
  throw UsageFailure("cannot run " + python + " (" +
                     std::error_code(err, std::generic_category()).message() +
                     "): memscope estimate needs Python 3 with memscope and PyTorch "
                     "(pip install memscope torch); MEMSCOPE_PYTHON names another interpreter");
}

}  // namespace

void add_estimate_command(CLI::App& app, Action& action) {
  CLI::App* sub = app.add_subcommand(
      "estimate",
      "Estimate a training step's GPU memory on a machine without a GPU: SCRIPT.py:FUNCTION "
      "builds the model on \"cuda\" and returns the step; peak allocated and reserved, whether "
      "it fits --capacity, what is live at the peak, --max-batch. Runs `python3 -m "
      "memscope.estimate` (needs PyTorch); `memscope estimate --help` lists its options.");
  // Every argument, --help included, belongs to the Python module.
  sub->set_help_flag();
  sub->prefix_command();
  sub->allow_extras();
  sub->callback([sub, &action] { action = [sub] { return exec_python(sub->remaining()); }; });
}

}  // namespace memscope::cli
