#include "probes/nvml/visible_devices.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "common/text.hpp"

namespace memscope::detail {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool starts_with_nocase(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && lower(text.substr(0, prefix.size())) == lower(prefix);
}

// The hex-and-dashes body of a UUID, lower case, without "GPU-".
std::string uuid_body(std::string_view uuid) {
  if (starts_with_nocase(uuid, "GPU-")) uuid.remove_prefix(4);
  return lower(uuid);
}

// The one device whose UUID starts with `entry`, or nullopt when none or several do.
std::optional<unsigned> match_uuid(std::string_view entry, const std::vector<std::string>& uuids) {
  const std::string wanted = uuid_body(entry);
  if (wanted.empty()) return std::nullopt;
  std::optional<unsigned> found;
  for (std::size_t i = 0; i < uuids.size(); ++i) {
    if (uuid_body(uuids[i]).starts_with(wanted)) {
      if (found) return std::nullopt;  // ambiguous prefix
      found = static_cast<unsigned>(i);
    }
  }
  return found;
}

bool is_uuid_like(std::string_view entry) {
  const std::string body = uuid_body(entry);
  return !body.empty() && std::all_of(body.begin(), body.end(), [](char c) {
    return std::isxdigit(static_cast<unsigned char>(c)) != 0 || c == '-';
  });
}

}  // namespace

std::vector<VisibleDevice> resolve_visible_devices(std::optional<std::string_view> visible,
                                                   const std::vector<std::string>& uuids) {
  std::vector<VisibleDevice> out;
  if (!visible) {
    for (unsigned i = 0; i < uuids.size(); ++i) out.push_back({std::to_string(i), i});
    return out;
  }
  std::string_view rest = *visible;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view entry = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    std::optional<unsigned> physical;
    bool mig = false;
    unsigned index = 0;
    const auto [end, ec] = std::from_chars(entry.data(), entry.data() + entry.size(), index);
    if (!entry.empty() && ec == std::errc{} && end == entry.data() + entry.size()) {
      if (index < uuids.size()) physical = index;
    } else if (starts_with_nocase(entry, "MIG-")) {
      mig = true;
    } else if (is_uuid_like(entry)) {
      physical = match_uuid(entry, uuids);
    }
    if (!physical && !mig) break;  // invalid: this entry and all after it are hidden
    const bool repeated = physical && std::any_of(out.begin(), out.end(), [&](const auto& d) {
                            return d.physical == physical;
                          });
    if (repeated) break;
    out.push_back({std::string(entry), physical});
  }
  return out;
}

}  // namespace memscope::detail
