// memscope info [--json]: the machine as memscope sees it: host memory and this process's cgroup
// limit, each GPU with its memory and the processes using it, and whether NVML and CUDA are
// usable here and why not. A machine without GPUs is an answer, not an error: exit 0.
#include <CLI/CLI.hpp>
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
#include "memscope/json_envelope.hpp"
#include "memscope/report.hpp"
#include "memscope/report_text.hpp"
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
      // The envelope's fields (memscope/json_envelope.hpp), first as the docs show them.
      {"format", report::format_of_kind("info")},
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

// A section of the report: "label  value" lines under its heading.
report::Table& section(report::Report& report, std::string title) {
  return report.tables.emplace_back(
      report::Table{std::move(title), {"", ""}, {false, false}, {}, ""});
}

void row(report::Table& table, std::string label, std::string value) {
  table.rows.push_back({std::move(label), std::move(value)});
}

std::string usable_text(bool available, const std::string& reason) {
  return available ? "usable" : "not usable: " + reason;
}

void add_host(const HostInfo& host, report::Report& report) {
  report::Table& h = section(report, "Host memory (/proc/meminfo)");
  row(h, "total", bytes_text(host.mem_total));
  row(h, "available", bytes_text(host.mem_available));
  row(h, "swap total", host.swap_total == 0 ? "none" : bytes_text(host.swap_total));
  if (host.swap_total != 0) row(h, "swap free", bytes_text(host.swap_free));

  const CgroupMemory& cg = host.cgroup;
  report::Table& c = section(
      report, cg.version == 0 ? std::string("cgroup")
                              : "cgroup v" + std::to_string(cg.version) + " (" + cg.path + ")");
  if (cg.version != 0) {
    row(c, "limit", cg.limit < 0 ? "none" : bytes_text(cg.limit) + ", set at " + cg.limit_at);
    row(c, "in use", bytes_text(cg.current));
  }
  if (!cg.note.empty()) row(c, "note", cg.note);
}

void add_drivers(const GpuInfo& gpu, report::Report& report) {
  report::Table& d = section(report, "Drivers");
  row(d, "NVML", usable_text(gpu.nvml_available, gpu.nvml_reason));
  if (!gpu.driver_version.empty()) row(d, "driver version", gpu.driver_version);
  row(d, "CUDA", usable_text(gpu.cuda_available, gpu.cuda_reason));
  if (gpu.cuda_driver_version > 0) {
    row(d, "CUDA version",
        cuda_version_text(gpu.cuda_driver_version) + " (driver API), " +
            std::to_string(gpu.cuda_device_count) + " device(s) visible");
  }
  if (gpu.nvml_available && gpu.devices.empty()) row(d, "GPUs", "none (NVML lists no device)");
  if (!gpu.nvml_available) row(d, "GPUs", "not listed: NVML is not usable");
}

void add_gpu(const GpuDeviceInfo& dev, report::Report& report) {
  report::Table& g = section(report, "GPU " + std::to_string(dev.index) + ": " + dev.name +
                                         (dev.uuid.empty() ? "" : " (" + dev.uuid + ")"));
  if (!dev.error.empty()) row(g, "error", dev.error);
  if (dev.total >= 0) {
    row(g, "total", bytes_text(dev.total));
    row(g, "used", bytes_text(dev.used));
    row(g, "free", bytes_text(dev.free));
    if (dev.reserved > 0) {
      row(g, "reserved",
          bytes_text(dev.reserved) + ", by the driver: not in total (physical " +
              format_bytes(dev.total + dev.reserved) + ", as nvidia-smi shows)");
    }
  }
  if (dev.processes.empty()) row(g, "processes", "none");
  for (const GpuProcessInfo& p : dev.processes) {
    const std::string memory = p.used < 0 ? "memory not attributed" : format_bytes(p.used);
    row(g, "pid " + std::to_string(p.pid),
        memory + "  " + (p.command.empty() ? "(command not visible)" : p.command));
  }
}

// One key / value table per section: the host, its cgroup, the drivers, each GPU.
report::Report info_report(const HostInfo& host, const GpuInfo& gpu) {
  report::Report report;
  add_host(host, report);
  add_drivers(gpu, report);
  for (const GpuDeviceInfo& dev : gpu.devices) add_gpu(dev, report);
  return report;
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
        std::fputs(report::render_text(info_report(host, gpu)).c_str(), stdout);
      }
      if (std::fflush(stdout) != 0) throw OutputFailure("standard output could not be written");
      return static_cast<int>(kExitOk);
    };
  });
}

}  // namespace memscope::cli
