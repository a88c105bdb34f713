// RunRecord <-> JSON ("format": "memscope-run", "version": 1). The layout mirrors the structs
// field by field, so a reader in another language needs no other documentation than
// run_record.hpp. Reading checks every field's type and names the first wrong one with its
// path ("processes[2].peak_rss"), because these files are edited, truncated and hand-made.
#include "run/run_record.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "memscope/errors.hpp"
#include "memscope/json_envelope.hpp"
#include "memscope/json_reader.hpp"

namespace memscope::cli {
namespace {

constexpr int kRunFormatVersion = 1;
constexpr const char* kRunKind = "a memscope run recording, written by 'memscope run --json'";

using Json = nlohmann::json;

Json optional_int(const std::optional<int>& value) {
  return value ? Json(*value) : Json(nullptr);
}

Json rank_env_to_json(const RankEnv& env) {
  return Json{{"rank", optional_int(env.rank)},
              {"variable", env.rank_variable},
              {"local_rank", optional_int(env.local_rank)},
              {"world_size", optional_int(env.world_size)},
              {"local_world_size", optional_int(env.local_world_size)}};
}

Json process_to_json(const RunProcess& p) {
  Json json{{"pid", p.pid},
            {"ppid", p.ppid},
            {"command", p.command},
            {"start", p.start},
            {"end", p.end},
            {"peak_rss", p.peak_rss},
            {"peak_rss_source", p.peak_rss_source},
            {"peak_gpu", p.peak_gpu},
            {"exit_code", optional_int(p.exit_code)},
            {"exit_signal", optional_int(p.exit_signal)},
            {"t", p.t},
            {"rss", p.rss},
            {"gpu", p.gpu}};
  if (p.rank.rank) json["rank"] = rank_env_to_json(p.rank);
  return json;
}

Json rank_to_json(const RunRank& r) {
  return Json{{"rank", r.rank},
              {"variable", r.variable},
              {"local_rank", optional_int(r.local_rank)},
              {"world_size", optional_int(r.world_size)},
              {"local_world_size", optional_int(r.local_world_size)},
              {"pid", r.pid},
              {"command", r.command},
              {"pids", r.pids},
              {"peak_rss", r.peak_rss},
              {"peak_rss_source", r.peak_rss_source},
              {"own_peak_rss", r.own_peak_rss},
              {"sampled_peak_rss", r.sampled_peak_rss},
              {"sum_of_peaks", r.sum_of_peaks},
              {"peak_gpu", r.peak_gpu},
              {"start", r.start},
              {"end", r.end},
              {"exit_code", optional_int(r.exit_code)},
              {"exit_signal", optional_int(r.exit_signal)},
              {"stages", r.stages}};
}

Json mark_to_json(const RunMark& m) {
  return Json{{"t", m.t},         {"pid", m.pid}, {"kind", m.kind},
              {"stage", m.stage}, {"hwm", m.hwm}, {"metrics", m.metrics}};
}

Json stage_to_json(const RunStage& s) {
  return Json{{"name", s.name},
              {"pid", s.pid},
              {"begin", s.begin},
              {"end", s.end},
              {"tree_rss_peak", s.tree_rss_peak},
              {"gpu_peak", s.gpu_peak},
              {"metrics", s.metrics}};
}

Json gpu_to_json(const RunGpu& g) {
  return Json{{"index", g.index}, {"name", g.name}, {"total", g.total}, {"used", g.used}};
}

using report::JsonObject;

// Process ids listed in `key`.
std::vector<int> pids_of(const JsonObject& f, const char* key) {
  std::vector<int> out;
  for (const std::int64_t pid : f.integers(key)) {
    if (pid < 0 || pid > INT32_MAX) f.fail(key, "must hold process ids");
    out.push_back(static_cast<int>(pid));
  }
  return out;
}

RunProcess process_from_json(const JsonObject& f) {
  RunProcess p;
  p.pid = f.small_int("pid");
  p.ppid = f.small_int("ppid");
  p.command = f.text("command");
  p.start = f.number("start");
  p.end = f.number("end");
  p.peak_rss = f.integer("peak_rss");
  p.peak_rss_source = f.text("peak_rss_source");
  p.peak_gpu = f.integer("peak_gpu");
  p.exit_code = f.optional_small_int("exit_code");
  p.exit_signal = f.optional_small_int("exit_signal");
  p.t = f.numbers("t");
  p.rss = f.integers("rss");
  p.gpu = f.integers("gpu");
  if (p.rss.size() != p.t.size()) f.fail("rss", "must have one value per entry of 't'");
  if (!p.gpu.empty() && p.gpu.size() != p.t.size()) {
    f.fail("gpu", "must be empty or have one value per entry of 't'");
  }
  if (f.has("rank")) {
    const JsonObject r = f.object("rank");
    p.rank.rank = r.optional_small_int("rank");
    p.rank.rank_variable = r.text("variable");
    p.rank.local_rank = r.optional_small_int("local_rank");
    p.rank.world_size = r.optional_small_int("world_size");
    p.rank.local_world_size = r.optional_small_int("local_world_size");
  }
  return p;
}

RunRank rank_from_json(const JsonObject& f) {
  RunRank r;
  r.rank = f.small_int("rank");
  r.variable = f.text("variable");
  r.local_rank = f.optional_small_int("local_rank");
  r.world_size = f.optional_small_int("world_size");
  r.local_world_size = f.optional_small_int("local_world_size");
  r.pid = f.small_int("pid");
  r.command = f.text("command");
  r.pids = pids_of(f, "pids");
  r.peak_rss = f.integer("peak_rss");
  r.peak_rss_source = f.text("peak_rss_source");
  r.own_peak_rss = f.integer("own_peak_rss");
  r.sampled_peak_rss = f.integer("sampled_peak_rss");
  r.sum_of_peaks = f.integer("sum_of_peaks");
  r.peak_gpu = f.integer("peak_gpu");
  r.start = f.number("start");
  r.end = f.number("end");
  r.exit_code = f.optional_small_int("exit_code");
  r.exit_signal = f.optional_small_int("exit_signal");
  r.stages = f.texts("stages");
  return r;
}

RunMark mark_from_json(const JsonObject& f) {
  RunMark m;
  m.t = f.number("t");
  m.pid = f.small_int("pid");
  m.kind = f.text("kind");
  m.stage = f.text("stage");
  m.hwm = f.integer("hwm");
  m.metrics = f.integer_map("metrics");
  return m;
}

RunStage stage_from_json(const JsonObject& f) {
  RunStage s;
  s.name = f.text("name");
  s.pid = f.small_int("pid");
  s.begin = f.number("begin");
  s.end = f.number("end");
  s.tree_rss_peak = f.integer("tree_rss_peak");
  s.gpu_peak = f.integer("gpu_peak");
  s.metrics = f.integer_map("metrics");
  return s;
}

RunGpu gpu_from_json(const JsonObject& f) {
  RunGpu g;
  const std::int64_t index = f.integer("index");
  if (index < 0 || index > INT32_MAX) f.fail("index", "must be a GPU index >= 0");
  g.index = static_cast<unsigned>(index);
  g.name = f.text("name");
  g.total = f.integer("total");
  g.used = f.integers("used");
  return g;
}

// Reads each element of the array `key` with `read`.
template <class T, class Read>
std::vector<T> list_from_json(const JsonObject& f, const char* key, Read read) {
  std::vector<T> out;
  for (const JsonObject& item : f.objects(key)) out.push_back(read(item));
  return out;
}

}  // namespace

Json run_record_to_json(const RunRecord& record) {
  Json processes = Json::array();
  for (const RunProcess& p : record.processes) processes.push_back(process_to_json(p));
  Json marks = Json::array();
  for (const RunMark& m : record.marks) marks.push_back(mark_to_json(m));
  Json stages = Json::array();
  for (const RunStage& s : record.stages) stages.push_back(stage_to_json(s));
  Json gpus = Json::array();
  for (const RunGpu& g : record.gpus) gpus.push_back(gpu_to_json(g));
  Json json = report::envelope("run", kRunFormatVersion);
  json.update(Json{{"command", record.command},
                   {"start_unix", record.start_unix},
                   {"duration", record.duration},
                   {"interval", record.interval},
                   {"exit_code", record.exit_code},
                   {"child_exit_code", optional_int(record.child_exit_code)},
                   {"child_signal", optional_int(record.child_signal)},
                   {"gpu_status", record.gpu_status},
                   {"host_total", record.host_total},
                   {"cgroup_limit", record.cgroup_limit},
                   {"t", record.t},
                   {"tree_rss", record.tree_rss},
                   {"tree_gpu", record.tree_gpu},
                   {"peak_tree_rss", record.peak_tree_rss},
                   {"peak_tree_rss_t", record.peak_tree_rss_t},
                   {"gpus", std::move(gpus)},
                   {"processes", std::move(processes)},
                   {"marks", std::move(marks)},
                   {"stages", std::move(stages)},
                   {"notes", record.notes}});
  if (!record.ranks.empty()) {
    Json ranks = Json::array();
    for (const RunRank& r : record.ranks) ranks.push_back(rank_to_json(r));
    json["ranks"] = std::move(ranks);
  }
  return json;
}

RunRecord run_record_from_json(const Json& json, const std::string& source) {
  const report::JsonSource file(source, kRunKind);
  const JsonObject f(file, json, "");
  (void)report::read_envelope(f, "run", kRunFormatVersion);
  RunRecord r;
  r.command = f.texts("command");
  r.start_unix = f.number("start_unix");
  r.duration = f.number("duration");
  r.interval = f.number("interval");
  r.exit_code = f.small_int("exit_code");
  r.child_exit_code = f.optional_small_int("child_exit_code");
  r.child_signal = f.optional_small_int("child_signal");
  r.gpu_status = f.text("gpu_status");
  r.host_total = f.integer("host_total");
  r.cgroup_limit = f.integer("cgroup_limit");
  r.t = f.numbers("t");
  r.tree_rss = f.integers("tree_rss");
  r.tree_gpu = f.integers("tree_gpu");
  if (r.tree_rss.size() != r.t.size()) f.fail("tree_rss", "must have one value per entry of 't'");
  if (!r.tree_gpu.empty() && r.tree_gpu.size() != r.t.size()) {
    f.fail("tree_gpu", "must be empty or have one value per entry of 't'");
  }
  r.peak_tree_rss = f.integer("peak_tree_rss");
  r.peak_tree_rss_t = f.number("peak_tree_rss_t");
  r.gpus = list_from_json<RunGpu>(f, "gpus", gpu_from_json);
  r.processes = list_from_json<RunProcess>(f, "processes", process_from_json);
  r.marks = list_from_json<RunMark>(f, "marks", mark_from_json);
  r.stages = list_from_json<RunStage>(f, "stages", stage_from_json);
  if (f.has("ranks")) r.ranks = list_from_json<RunRank>(f, "ranks", rank_from_json);
  if (json.contains("notes")) r.notes = f.texts("notes");
  return r;
}

const RunStage* stage_at(const RunRecord& record, double t) {
  const RunStage* found = nullptr;
  for (const RunStage& s : record.stages) {
    const double end = s.end < 0.0 ? record.duration : s.end;
    if (s.begin <= t && t <= end && (found == nullptr || s.begin >= found->begin)) found = &s;
  }
  return found;
}

}  // namespace memscope::cli
