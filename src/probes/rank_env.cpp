#include "memscope/rank_env.hpp"

#include <array>
#include <charconv>
#include <map>
#include <optional>
#include <string>

#include "common/system_memory.hpp"

namespace memscope {
namespace {

// In order of preference: the global rank first, then the local one (see rank_env.hpp).
constexpr std::array<const char*, 4> kRankVariables{"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                                    "LOCAL_RANK"};
constexpr std::array<const char*, 3> kLocalRankVariables{"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                                         "MPI_LOCALRANKID"};
constexpr std::array<const char*, 3> kWorldSizeVariables{"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE",
                                                         "PMI_SIZE"};
constexpr std::array<const char*, 2> kLocalWorldSizeVariables{"LOCAL_WORLD_SIZE",
                                                              "OMPI_COMM_WORLD_LOCAL_SIZE"};

// A decimal number >= 0 filling the whole value; nullopt otherwise ("", "-1", "3a").
std::optional<int> non_negative(std::string_view text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < 0)
    return std::nullopt;
  return value;
}

template <std::size_t N>
std::optional<int> first_of(const std::map<std::string_view, std::string_view>& values,
                            const std::array<const char*, N>& names, std::string* which) {
  for (const char* name : names) {
    const auto it = values.find(name);
    if (it == values.end()) continue;
    if (const std::optional<int> value = non_negative(it->second)) {
      if (which != nullptr) *which = name;
      return value;
    }
  }
  return std::nullopt;
}

}  // namespace

RankEnv parse_rank_env(std::string_view environ_block) {
  // Only the variables named above are kept; views into environ_block.
  std::map<std::string_view, std::string_view> values;
  while (!environ_block.empty()) {
    const std::size_t end = environ_block.find('\0');
    const std::string_view entry = environ_block.substr(0, end);
    const std::size_t equals = entry.find('=');
    if (equals != std::string_view::npos) {
      const std::string_view name = entry.substr(0, equals);
      if (name.find("RANK") != std::string_view::npos ||
          name.find("SIZE") != std::string_view::npos) {
        values.emplace(name, entry.substr(equals + 1));  // the first one wins, as in getenv
      }
    }
    if (end == std::string_view::npos) break;
    environ_block.remove_prefix(end + 1);
  }
  RankEnv env;
  env.rank = first_of(values, kRankVariables, &env.rank_variable);
  env.local_rank = first_of(values, kLocalRankVariables, nullptr);
  env.world_size = first_of(values, kWorldSizeVariables, nullptr);
  env.local_world_size = first_of(values, kLocalWorldSizeVariables, nullptr);
  return env;
}

RankEnv read_rank_env(int pid) {
  const std::optional<std::string> text = detail::read_proc_file(pid, "environ");
  return text ? parse_rank_env(*text) : RankEnv{};
}

}  // namespace memscope
