// memscope estimate SCRIPT.py:FUNCTION [--batch N] [--capacity SIZE] [--max-batch] [--json PATH]
// [--html PATH] ...: a training step's GPU memory estimated without a GPU. The capture needs
// PyTorch, so this subcommand is the Python module's front door: it execs
// `python3 -m memscope._estimate_command` with every argument as given (docs/estimate.md),
// after putting this build's Python package on PYTHONPATH when there is one next to the command
// and naming the command in MEMSCOPE_EXE.
// Before that it checks what every command checks before its work: --capacity has a unit
// (parse_size_with_unit; a capacity that starts with a letter names a card, "h100-80gb", which
// the Python side looks up and refuses, listing the cards, when it knows none) and every output can
// be written and is neither the script nor another output (check_outputs), so a typo costs no
// capture.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "cli.hpp"
#include "commands.hpp"
#include "input_files.hpp"
#include "memscope/units.hpp"

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

// The module's options that take a value (python/memscope/_estimate.py, main(); argparse there
// takes no abbreviations, so these spellings are the only ones).
constexpr std::array<std::string_view, 12> kValueOptions{
    "--batch", "--steps",    "--capacity", "--config", "--device", "--json",
    "--html",  "--snapshot", "--hf",       "--seq",    "--optim",  "--attn"};

// What the checks need from the module's arguments: SCRIPT of SCRIPT.py:FUNCTION (or --hf's
// config file), --capacity and the outputs, as `--opt VALUE` or `--opt=VALUE`. Nothing when
// --help is asked for.
struct EstimateArguments {
  std::string script;
  std::string hf;
  std::string capacity;
  std::vector<NamedPath> outputs;
  bool help = false;
};

EstimateArguments scan_arguments(const std::vector<std::string>& args) {
  EstimateArguments out;
  auto take = [&out](std::string_view option, const std::string& value) {
    if (option == "--capacity") out.capacity = value;
    if (option == "--hf") out.hf = value;
    for (const std::string_view output : {"--json", "--html", "--snapshot"}) {
      if (option == output) out.outputs.push_back({output, value});
    }
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") out.help = true;
    if (a.rfind("--", 0) == 0) {
      const std::size_t eq = a.find('=');
      const std::string_view option = std::string_view(a).substr(0, eq);
      const bool takes_value =
          std::find(kValueOptions.begin(), kValueOptions.end(), option) != kValueOptions.end();
      if (takes_value && eq != std::string::npos) {
        take(option, a.substr(eq + 1));
      } else if (takes_value && i + 1 < args.size()) {
        take(option, args[++i]);
      }
    } else if (out.script.empty() && !a.empty() && a[0] != '-') {
      out.script = a.substr(0, a.rfind(':'));
    }
  }
  return out;
}

// The checks every command makes before its work (docs/cli.md, "Inputs and outputs").
void check_arguments(const std::vector<std::string>& args) {
  const EstimateArguments a = scan_arguments(args);
  if (a.help) return;
  const bool names_card =
      !a.capacity.empty() && std::isalpha(static_cast<unsigned char>(a.capacity.front())) != 0;
  if (!a.capacity.empty() && !names_card) (void)parse_size_with_unit(a.capacity, "--capacity");
  check_outputs({{"SCRIPT", a.script}, {"--hf", a.hf}}, a.outputs);
}

int exec_python(const std::vector<std::string>& args) {
  check_arguments(args);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    use_build_tree_package(exe);
    ::setenv("MEMSCOPE_EXE", exe.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
  }
  const char* env_python = std::getenv("MEMSCOPE_PYTHON");  // NOLINT(concurrency-mt-unsafe)
  const std::string python = env_python != nullptr && *env_python != '\0' ? env_python : "python3";
  std::vector<std::string> argv_strings{python, "-m", "memscope._estimate_command"};
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
      "memscope._estimate_command` (needs PyTorch); `memscope estimate --help` lists its "
      "options.");
  // Every argument, --help included, belongs to the Python module.
  sub->set_help_flag();
  sub->prefix_command();
  sub->allow_extras();
  sub->callback([sub, &action] { action = [sub] { return exec_python(sub->remaining()); }; });
}

}  // namespace memscope::cli
