#include <fmt/format.h>

#include <charconv>
#include <string>

#include "backends/cuda/cuda_factory.hpp"
#include "memscope/backend.hpp"
#include "memscope/errors.hpp"
#include "memscope/host_backend.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

[[noreturn]] void bad_spec(std::string_view spec, std::string_view why) {
  throw ConfigError(fmt::format("backend '{}': {}; use \"host\", \"sim:<size>\" (e.g. sim:24GiB), "
                                "\"cuda\" or \"cuda:<index>\"",
                                spec, why),
                    "backend", std::string(spec));
}

}  // namespace

std::unique_ptr<Backend> make_backend(std::string_view spec) {
  if (spec == "host") return std::make_unique<HostBackend>();
  if (spec.starts_with("sim:")) {
    std::size_t capacity = 0;
    try {
      capacity = parse_size(spec.substr(4), "simulated device capacity");
    } catch (const ConfigError& e) {
      bad_spec(spec, e.what());
    }
    if (capacity == 0) bad_spec(spec, "a simulated device needs a capacity above zero");
    return std::make_unique<SimulatedBackend>(capacity);
  }
  if (spec == "cuda") return detail::make_cuda_backend(0);
  if (spec.starts_with("cuda:")) {
    const std::string_view digits = spec.substr(5);
    int index = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec != std::errc{} || end != digits.data() + digits.size() || index < 0) {
      bad_spec(spec, "the device index must be a non-negative integer");
    }
    return detail::make_cuda_backend(index);
  }
  bad_spec(spec, "unknown backend");
}

}  // namespace memscope
