// memscope info [--json]: the machine as memscope sees it: host memory and this process's cgroup
// limit, each GPU with its memory and the processes using it, and whether NVML and CUDA are
// usable here and why not. A machine without GPUs is an answer, not an error: exit 0.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "commands.hpp"
#include "info/info_gpu.hpp"
#include "memscope/errors.hpp"
#include "memscope/host_info.hpp"
#include "memscope/units.hpp"

namespace memscope::cli {
namespace {

// ordered: the fields print in the order the report documents them.
using json = nlohmann::ordered_json;

// -1 (unknown / none) as JSON null.
json bytes_or_null(std::int64_t bytes) {
  return bytes < 0 ? json(nullptr) : json(bytes);
}
json text_or_null(const std::string& text) {
  return text.empty() ? json(nullptr) : json(text);
}

json to_json(const HostInfo& host, const GpuInfo& gpu) {
  json gpus = json::array();
  for (const GpuDeviceInfo& d : gpu.devices) {
    json processes = json::array();
    for (const GpuProcessInfo& p : d.processes) {
      processes.push_back(
          {{"pid", p.pid}, {"used", bytes_or_null(p.used)}, {"command", text_or_null(p.command)}});
    }
    gpus.push_back({{"index", d.index},
                    {"name", text_or_null(d.name)},
                    {"uuid", text_or_null(d.uuid)},
                    {"total", bytes_or_null(d.total)},
                    {"used", bytes_or_null(d.used)},
                    {"free", bytes_or_null(d.free)},
                    {"reserved", bytes_or_null(d.reserved)},
                    {"processes", std::move(processes)},
                    {"error", text_or_null(d.error)}});
  }
  const CgroupMemory& cg = host.cgroup;
  return {
      {"format", "memscope-info"},
      {"version", 1},
      {"host",
       {{"mem_total", bytes_or_null(host.mem_total)},
        {"mem_available", bytes_or_null(host.mem_available)},
        {"swap_total", bytes_or_null(host.swap_total)},
        {"swap_free", bytes_or_null(host.swap_free)}}},
      {"cgroup",
       {{"version", cg.version == 0 ? json(nullptr) : json(cg.version)},
        {"path", text_or_null(cg.path)},
        {"limit", bytes_or_null(cg.limit)},
        {"limit_at", text_or_null(cg.limit_at)},
        {"current", bytes_or_null(cg.current)},
        {"note", text_or_null(cg.note)}}},
      {"nvml",
       {{"available", gpu.nvml_available},
        {"reason", text_or_null(gpu.nvml_reason)},
        {"driver_version", text_or_null(gpu.driver_version)}}},
      {"cuda",
       {{"available", gpu.cuda_available},
        {"reason", text_or_null(gpu.cuda_reason)},
        {"driver_version", text_or_null(cuda_version_text(gpu.cuda_driver_version))},
        {"device_count", gpu.cuda_device_count}}},
      {"gpus", std::move(gpus)},
  };
}

// "23.54 GiB (25276071936 bytes)": readable, and exact for whoever compares.
std::string bytes_text(std::int64_t bytes) {
  if (bytes < 0) return "unknown";
  return format_bytes(bytes) + " (" + std::to_string(bytes) + " bytes)";
}

// Aligned "label  value" lines under a section heading.
class Section {
 public:
  explicit Section(std::string title) : title_(std::move(title)) {}
  void row(std::string label, std::string value) {
    rows_.emplace_back(std::move(label), std::move(value));
  }
  void print(std::FILE* out, std::size_t width) const {
    std::fprintf(out, "%s\n", title_.c_str());
    for (const auto& [label, value] : rows_) {
      std::fprintf(out, "  %-*s  %s\n", static_cast<int>(width), label.c_str(), value.c_str());
    }
  }
  [[nodiscard]] std::size_t label_width() const {
    std::size_t width = 0;
    for (const auto& row : rows_) width = std::max(width, row.first.size());
    return width;
  }

 private:
  std::string title_;
  std::vector<std::pair<std::string, std::string>> rows_;
};

std::string usable_text(bool available, const std::string& reason) {
  return available ? "usable" : "not usable: " + reason;
}

void print_text(std::FILE* out, const HostInfo& host, const GpuInfo& gpu) {
  std::vector<Section> sections;
  Section& h = sections.emplace_back("Host memory (/proc/meminfo)");
  h.row("total", bytes_text(host.mem_total));
  h.row("available", bytes_text(host.mem_available));
  h.row("swap total", host.swap_total == 0 ? "none" : bytes_text(host.swap_total));
  if (host.swap_total != 0) h.row("swap free", bytes_text(host.swap_free));

  const CgroupMemory& cg = host.cgroup;
  Section& c = sections.emplace_back(cg.version == 0 ? std::string("cgroup")
                                                     : "cgroup v" + std::to_string(cg.version) +
                                                           " (" + cg.path + ")");
  if (cg.version != 0) {
    c.row("limit", cg.limit < 0 ? "none" : bytes_text(cg.limit) + ", set at " + cg.limit_at);
    c.row("in use", bytes_text(cg.current));
  }
  if (!cg.note.empty()) c.row("note", cg.note);

  Section& d = sections.emplace_back("Drivers");
  d.row("NVML", usable_text(gpu.nvml_available, gpu.nvml_reason));
  if (!gpu.driver_version.empty()) d.row("driver version", gpu.driver_version);
  d.row("CUDA", usable_text(gpu.cuda_available, gpu.cuda_reason));
  if (gpu.cuda_driver_version > 0) {
    d.row("CUDA version", cuda_version_text(gpu.cuda_driver_version) + " (driver API), " +
                              std::to_string(gpu.cuda_device_count) + " device(s) visible");
  }
  if (gpu.nvml_available && gpu.devices.empty()) d.row("GPUs", "none (NVML lists no device)");
  if (!gpu.nvml_available) d.row("GPUs", "not listed: NVML is not usable");

  for (const GpuDeviceInfo& dev : gpu.devices) {
    Section& g = sections.emplace_back("GPU " + std::to_string(dev.index) + ": " + dev.name +
                                       (dev.uuid.empty() ? "" : " (" + dev.uuid + ")"));
    if (!dev.error.empty()) g.row("error", dev.error);
    if (dev.total >= 0) {
      g.row("total", bytes_text(dev.total));
      g.row("used", bytes_text(dev.used));
      g.row("free", bytes_text(dev.free));
      if (dev.reserved > 0) {
        g.row("reserved", bytes_text(dev.reserved) + ", by the driver: not in total (physical " +
                              format_bytes(dev.total + dev.reserved) + ", as nvidia-smi shows)");
      }
    }
    if (dev.processes.empty()) g.row("processes", "none");
    for (const GpuProcessInfo& p : dev.processes) {
      const std::string memory = p.used < 0 ? "memory not attributed" : format_bytes(p.used);
      g.row("pid " + std::to_string(p.pid),
            memory + "  " + (p.command.empty() ? "(command not visible)" : p.command));
    }
  }

  std::size_t width = 0;
  for (const Section& s : sections) width = std::max(width, s.label_width());
  bool first = true;
  for (const Section& s : sections) {
    if (!first) std::fputc('\n', out);
    first = false;
    s.print(out, width);
  }
}

}  // namespace

void add_info_command(CLI::App& app, Action& action) {
  CLI::App* sub = app.add_subcommand(
      "info",
      "Show the machine's memory: host total and available, this process's cgroup limit, each "
      "GPU (NVML) with the processes using it, and whether NVML and CUDA are usable and why "
      "not. Exit 0 also without GPUs.");
  auto json_output = std::make_shared<bool>(false);
  sub->add_flag("--json", *json_output,
                "print one JSON object (\"format\": \"memscope-info\") instead of text");
  sub->callback([&action, json_output] {
    action = [json_output] {
      const HostInfo host = [] {
        try {
          return read_host_info();
        } catch (const BackendUnavailableError& e) {
          throw InputFailure(std::string(e.what()) + ": memscope info needs Linux's /proc");
        }
      }();
      const GpuInfo gpu = read_gpu_info();
      if (*json_output) {
        std::printf("%s\n", to_json(host, gpu).dump(2).c_str());
      } else {
        print_text(stdout, host, gpu);
      }
      if (std::fflush(stdout) != 0) throw OutputFailure("standard output could not be written");
      return static_cast<int>(kExitOk);
    };
  });
}

}  // namespace memscope::cli
