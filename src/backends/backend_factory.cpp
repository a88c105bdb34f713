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

constexpr std::string_view kSimPrefix = "sim:";
constexpr std::string_view kCudaPrefix = "cuda:";

[[noreturn]] void bad_spec(std::string_view spec, std::string_view why) {
  throw ConfigError(fmt::format("backend '{}': {}; use \"host\", \"sim:<size>\" (e.g. sim:24GiB), "
                                "\"cuda\" or \"cuda:<index>\"",
                                spec, why),
                    "backend", std::string(spec));
}

// What parse() checks of the numbers, for specs built in code too; `text` names the spec.
void check(const BackendSpec& spec, std::string_view text) {
  if (spec.type == BackendSpec::Type::simulated && spec.capacity == 0) {
    bad_spec(text, "a simulated device needs a capacity above zero");
  }
  if (spec.type == BackendSpec::Type::cuda && spec.device_index < 0) {
    bad_spec(text, "the device index must be a non-negative integer");
  }
}

}  // namespace

BackendSpec BackendSpec::parse(std::string_view text) {
  BackendSpec spec;
  if (text == "host") {
    spec.type = Type::host;
  } else if (text.starts_with(kSimPrefix)) {
    spec.type = Type::simulated;
    try {
      spec.capacity =
          parse_size_with_unit(text.substr(kSimPrefix.size()), "simulated device capacity");
    } catch (const ConfigError& e) {
      bad_spec(text, e.what());
    }
  } else if (text == "cuda") {
    spec.type = Type::cuda;
  } else if (text.starts_with(kCudaPrefix)) {
    spec.type = Type::cuda;
    const std::string_view digits = text.substr(kCudaPrefix.size());
    const auto [end, ec] =
        std::from_chars(digits.data(), digits.data() + digits.size(), spec.device_index);
    if (ec != std::errc{} || end != digits.data() + digits.size()) spec.device_index = -1;
  } else {
    bad_spec(text, "unknown backend");
  }
  check(spec, text);
  return spec;
}

std::string BackendSpec::to_string() const {
  switch (type) {
    case Type::host:
      return "host";
    case Type::simulated:
      return std::string(kSimPrefix) + format_size_exact(capacity);
    case Type::cuda:
      return std::string(kCudaPrefix) + std::to_string(device_index);
  }
  return "host";
}

std::unique_ptr<Backend> make_backend(const BackendSpec& spec) {
  check(spec, spec.to_string());
  switch (spec.type) {
    case BackendSpec::Type::host:
      return std::make_unique<HostBackend>();
    case BackendSpec::Type::simulated:
      return std::make_unique<SimulatedBackend>(spec.capacity);
    case BackendSpec::Type::cuda:
      return detail::make_cuda_backend(spec.device_index);
  }
  bad_spec(spec.to_string(), "unknown backend type");
}

std::unique_ptr<Backend> make_backend(std::string_view spec) {
  return make_backend(BackendSpec::parse(spec));
}

}  // namespace memscope
