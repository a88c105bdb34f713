// The report layer's model: what memscope shows of a run, a replay, a snapshot or saved
// metrics, as plain values. Producers (the memscope command's subcommands) build a Report and
// format nothing; the renderings are report_text.hpp (the terminal), report_json.hpp (the
// saved form) and report_html.hpp (one self-contained page). Times are seconds from the start
// of what is shown; memory in bytes.
//
// Thread safety: plain values. Ownership: a Report owns all its data. Errors: none.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace memscope::report {

// One line on the memory-over-time chart.
struct Series {
  std::string name;       // legend label, unique in a report: "allocated", "tree RSS", "pid 42 RSS"
  std::vector<double> t;  // seconds, non-decreasing
  std::vector<double> bytes;  // same length as t
  bool sampled = false;       // values were sampled at an interval (the legend says so)
  bool step = false;          // holds its value until the next point (allocator counters)
  std::string unit = "bytes";
  // Drawn dashed and over the other lines: for a line that often runs on top of another (live
  // requested bytes under allocated ones), which would otherwise hide it.
  bool dashed = false;
};

// A stage: a shaded band over [begin, end] with its name.
struct Band {
  std::string label;
  double begin = 0.0;
  double end = 0.0;
  std::string detail;  // shown on hover: "pid 42, 3.2 s, peak 1.2 GiB"
};

// The peak: a marker at (t, bytes) on `series`, with its label.
struct Marker {
  std::string series;  // the Series::name it sits on
  double t = 0.0;
  double bytes = 0.0;
  std::string label;  // "peak 1.21 GiB at 3.402 s (stage train)"
};

// A table under the chart; cells are already formatted. `numeric[i]` right-aligns column i.
struct Table {
  std::string title;
  std::vector<std::string> columns;
  std::vector<bool> numeric;
  std::vector<std::vector<std::string>> rows;
  std::string note;  // one line under the table
};

// Segments at one moment, blocks coloured by state.
struct SegmentMap {
  struct Block {
    std::uint64_t offset = 0;  // from the segment's start
    std::uint64_t size = 0;
    std::string state;  // "active_allocated", "active_pending_free", "inactive"
    std::string label;  // hover text: size, requested, allocating frame
  };
  struct Segment {
    std::uint64_t address = 0;
    std::uint64_t size = 0;
    std::string label;  // "stream 0, large pool"
    std::vector<Block> blocks;
  };
  std::string title;  // "Segments at the peak (event 1234, 3.402 s)"
  std::vector<Segment> segments;
};

struct Report {
  std::string title;     // the page's <title> and heading
  std::string subtitle;  // one line: the command, the trace file
  std::vector<std::pair<std::string, std::string>> summary;  // key / value lines at the top
  std::string x_label = "time (s)";
  std::string y_label = "memory (binary units: 1 GiB = 1024 MiB)";
  std::vector<Series> series;
  std::vector<Band> bands;
  std::optional<Marker> peak;
  std::optional<SegmentMap> segment_map;
  std::vector<Table> tables;
  std::vector<std::string> notes;  // e.g. "RSS is sampled every 100 ms; peaks are exact (VmHWM)"
};

}  // namespace memscope::report
