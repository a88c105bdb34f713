// memscope info (stub: being written).
#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "commands.hpp"

namespace memscope::cli {

void add_info_command(CLI::App& app, Action& action) {
  CLI::App* sub = app.add_subcommand("info", "(not written yet)");
  sub->callback([&action] { action = [] { return static_cast<int>(kExitInternal); }; });
}

}  // namespace memscope::cli
