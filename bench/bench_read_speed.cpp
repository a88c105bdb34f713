// memscope_read_speed: how fast memscope reads a PyTorch snapshot, against Python's pickle.loads
// on the same bytes, measured in the same run.
//
//   memscope_read_speed [snapshot.pickle] [--seconds S] [--python PYTHON]
//   memscope_read_speed [snapshot.pickle] --reads N --only pickle|snapshot|direct
//
// The second form reads N times with one reader and prints nothing: for callgrind, where the
// instructions of one read are (those of N = 4 minus those of N = 1) / 3.
// Each figure is MB/s (10^6 bytes of input per second) over repeated reads for about S seconds
// (default 2): the median, and the best, which a busy machine disturbs least. The file is read
// into memory once; only the parsing is timed. Python's figures come from
// bench/pickle_loads_speed.py, run on the same file in the same run (skipped without Python).
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>
#include <vector>

#include "memscope/pickle.hpp"
#include "memscope/trace.hpp"
#include "run_command.hpp"
#include "trace_corpus.hpp"

namespace {

struct Rate {
  double median = 0;
  double best = 0;
};

// MB/s of `read_once` over repeated runs for about `seconds`.
template <class F>
Rate mb_per_s(std::size_t bytes, double seconds, F&& read_once) {
  std::vector<double> rates;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  do {
    const auto start = std::chrono::steady_clock::now();
    read_once();
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    rates.push_back(static_cast<double>(bytes) / 1e6 / took.count());
  } while (std::chrono::steady_clock::now() < end || rates.size() < 5);
  std::sort(rates.begin(), rates.end());
  return {rates[rates.size() / 2], rates.back()};
}

std::string python_figure(const std::string& python, const std::string& path, double seconds) {
  const std::string script = std::string(MEMSCOPE_BENCH_DIR) + "/pickle_loads_speed.py";
  return memscope::bench::run_command(
      fmt::format("'{}' '{}' '{}' {} 2>/dev/null", python, script, path, seconds));
}

// --reads N --only READER: N reads by one reader and nothing else (for callgrind); the exit
// status.
int read_fixed(const std::string& data, const std::string& path, const std::string& only,
               int reads) {
  for (int i = 0; i < reads; ++i) {
    if (only == "pickle") {
      (void)memscope::read_pickle(data, path);
    } else if (only == "snapshot") {
      (void)memscope::read_torch_snapshot(memscope::read_pickle(data, path), path);
    } else if (only == "direct") {
      (void)memscope::read_torch_snapshot_pickle(data, path);
    } else {
      fmt::print(stderr, "memscope_read_speed: --only pickle, snapshot or direct\n");
      return 1;
    }
  }
  return 0;
}

// Each reader's MB/s (median and best over `seconds`), and Python's pickle.loads beside them.
void print_rates(const std::string& data, const std::string& path, double seconds,
                 const std::string& python) {
  const Rate pickle_only =
      mb_per_s(data.size(), seconds, [&] { (void)memscope::read_pickle(data, path); });
  const Rate snapshot = mb_per_s(data.size(), seconds, [&] {
    (void)memscope::read_torch_snapshot(memscope::read_pickle(data, path), path);
  });
  const Rate direct = mb_per_s(data.size(), seconds,
                               [&] { (void)memscope::read_torch_snapshot_pickle(data, path); });
  const memscope::TorchSnapshot s = memscope::read_torch_snapshot(memscope::read_pickle(data));
  std::size_t events = 0;
  for (const auto& trace : s.device_traces) events += trace.size();
  fmt::print("file: {} ({} bytes, {} segments, {} events, {} frames, {} stacks)\n", path,
             data.size(), s.segments.size(), events, s.strings.frames.size(),
             s.strings.stacks.size() - 1);
  fmt::print("| reader | MB/s, median | MB/s, best |\n|---|---:|---:|\n");
  fmt::print("| memscope read_pickle | {:.0f} | {:.0f} |\n", pickle_only.median, pickle_only.best);
  fmt::print("| memscope read_pickle + read_torch_snapshot | {:.0f} | {:.0f} |\n", snapshot.median,
             snapshot.best);
  fmt::print("| memscope read_torch_snapshot_pickle (no PickleValue) | {:.0f} | {:.0f} |\n",
             direct.median, direct.best);
  const std::string py = python_figure(python, path, seconds);
  if (py.empty()) {
    fmt::print("| Python pickle.loads | (no Python) | |\n");
  } else {
    fmt::print("| Python pickle.loads ({}) | {} |\n", python, py);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const auto small = memscope::corpus::find_trace(memscope::corpus::kSmallTrainStep);
  std::string path = small ? small->string() : std::string();
  std::string python = "python3";
  double seconds = 2.0;
  int reads = 0;  // --reads: a fixed number of reads with the reader named by --only
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--seconds" && i + 1 < argc) {
      seconds = std::stod(argv[++i]);
    } else if (arg == "--reads" && i + 1 < argc) {
      reads = std::stoi(argv[++i]);
    } else if (arg == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (arg == "--python" && i + 1 < argc) {
      python = argv[++i];
    } else {
      path = arg;
    }
  }
  if (path.empty()) {
    fmt::print("skipped: {}\n",
               memscope::corpus::missing_reason(memscope::corpus::kSmallTrainStep));
    return 0;
  }
  try {
    const std::string data = memscope::read_whole_file(path);
    if (reads > 0) return read_fixed(data, path, only, reads);
    print_rates(data, path, seconds, python);
  } catch (const std::exception& e) {
    fmt::print(stderr, "memscope_read_speed: {}\n", e.what());
    return 1;
  }
  return 0;
}
