// memscope diff (stub: being written).
#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "commands.hpp"

namespace memscope::cli {

void add_diff_command(CLI::App& app, Action& action) {
  CLI::App* sub = app.add_subcommand("diff", "(not written yet)");
  sub->callback([&action] { action = [] { return static_cast<int>(kExitInternal); }; });
}

}  // namespace memscope::cli
