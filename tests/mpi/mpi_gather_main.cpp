// memscope::mpi::gather across real MPI ranks (run by mpirun; tests/mpi/run_mpi.cmake checks the
// output). A plain main, not GoogleTest: every rank checks what it receives, rank 0 reports,
// and the exit code of every rank says whether any rank failed.
//
//   mpi_gather_main gather         stage metrics of real host allocations, a stage some ranks
//                                  skip, ties, the table on every rank, changing key sets and a
//                                  randomized run (fixed seed) checked against reduce()
//   mpi_gather_main time           (not a test) median time of a gather, for the docs
//   mpi_gather_main leave <rank>   <rank> finalizes without gathering; the others must get
//                                  GatherTimeout naming it, then finalize too
//   mpi_gather_main mixed          ranks 0 and 1 of a job whose ranks 2 and 3 run
//                                  tests/mpi/mixed_rank.py (an MPMD mpirun): the same gathers
//                                  and the same expected tables on both sides
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memscope/backend.hpp>
#include <memscope/caching_allocator.hpp>
#include <memscope/memory_source.hpp>
#include <memscope/mpi.hpp>
#include <memscope/rank_payload.hpp>
#include <memscope/tracker.hpp>
#include <random>
#include <string>
#include <vector>

namespace {

int g_rank = 0;
int g_size = 0;
int g_failures = 0;

void expect(bool ok, const std::string& what) {
  if (ok) return;
  ++g_failures;
  std::printf("rank %d: FAIL %s\n", g_rank, what.c_str());
  std::fflush(stdout);
}

void expect_eq(double got, double want, const std::string& what) {
  expect(got == want, what + ": got " + std::to_string(got) + ", want " + std::to_string(want));
}

// Two tables agree exactly: per-rank values, and every reduction field.
void expect_same(const memscope::mpi::RankTable& got, const memscope::mpi::RankTable& want,
                 const std::string& what) {
  expect(got.world_size == want.world_size, what + ": world_size");
  expect(got.ranks == want.ranks, what + ": per-rank values differ");
  expect(got.reductions.size() == want.reductions.size(), what + ": number of keys");
  for (const auto& [key, w] : want.reductions) {
    const auto it = got.reductions.find(key);
    if (it == got.reductions.end()) {
      expect(false, what + ": key " + key + " has no reduction");
      continue;
    }
    const auto& g = it->second;
    expect(g.min == w.min && g.max == w.max && g.sum == w.sum && g.mean == w.mean &&
               g.argmax == w.argmax && g.count == w.count && g.missing == w.missing,
           what + ": reduction of " + key);
  }
}

constexpr std::size_t kMiB = std::size_t{1} << 20;
// What rank r keeps and what it allocates and frees inside the train stage: different per
// rank, multiples of 512 bytes so the allocator's rounding leaves them exact.
std::size_t kept_bytes(int r) {
  return static_cast<std::size_t>(r + 1) * kMiB + static_cast<std::size_t>(r) * 512;
}
std::size_t transient_bytes(int r) {
  return static_cast<std::size_t>(g_size - r) * 2 * kMiB;
}

void stage_metrics_test() {
  memscope::CachingAllocator alloc(memscope::make_backend("host"));
  memscope::MemoryTracker tracker(
      {.sources = {memscope::make_allocator_source(alloc, memscope::SourceKind::cpu)},
       .implicit_init = false});
  void* kept = nullptr;
  {
    auto train = tracker.stage("train");
    kept = alloc.allocate(kept_bytes(g_rank));
    void* transient = alloc.allocate(transient_bytes(g_rank));
    alloc.deallocate(transient);
  }
  memscope::Metrics metrics;
  tracker.update_metrics("train", metrics);
  if (g_rank % 2 == 0) {  // a stage only the even ranks run
    auto eval = tracker.stage("eval");
    alloc.deallocate(alloc.allocate(kMiB * static_cast<std::size_t>(g_rank + 1)));
  }
  if (g_rank % 2 == 0) tracker.update_metrics("eval", metrics);
  // A key where ranks 1 and 2 tie for the maximum: argmax is the lower one.
  metrics["tie"] = std::int64_t{g_rank == 1 || g_rank == 2 ? 5 : 3};

  const auto table = memscope::mpi::gather(metrics);
  expect(table.has_value() == (g_rank == 0), "the table arrives on root 0 only");
  if (table) {
    const auto& t = *table;
    expect(t.world_size == g_size, "world_size");
    for (int r = 0; r < g_size; ++r) {
      const auto& values = t.ranks[static_cast<std::size_t>(r)];
      const std::string name = "rank " + std::to_string(r) + " ";
      expect(values.count("train_mem_cpu_alloc_delta") == 1, name + "alloc_delta present");
      if (values.count("train_mem_cpu_alloc_delta") == 1) {
        expect_eq(values.at("train_mem_cpu_alloc_delta"), static_cast<double>(kept_bytes(r)),
                  name + "train_mem_cpu_alloc_delta");
        expect_eq(values.at("train_mem_cpu_peaked_delta"), static_cast<double>(transient_bytes(r)),
                  name + "train_mem_cpu_peaked_delta");
      }
      expect(values.count("train_mem_cpu_mode") == 0, name + "text values are left out");
      expect(values.count("eval_mem_cpu_alloc_delta") == (r % 2 == 0 ? 1U : 0U),
             name + "eval keys only on even ranks");
    }
    const auto& alloc_delta = t.reductions.at("train_mem_cpu_alloc_delta");
    expect_eq(alloc_delta.max, static_cast<double>(kept_bytes(g_size - 1)), "alloc_delta max");
    expect_eq(alloc_delta.argmax, g_size - 1, "alloc_delta argmax");
    expect_eq(alloc_delta.min, static_cast<double>(kept_bytes(0)), "alloc_delta min");
    double sum = 0;
    for (int r = 0; r < g_size; ++r) sum += static_cast<double>(kept_bytes(r));
    expect_eq(alloc_delta.sum, sum, "alloc_delta sum");
    expect_eq(alloc_delta.mean, sum / g_size, "alloc_delta mean");
    const auto& peaked = t.reductions.at("train_mem_cpu_peaked_delta");
    expect_eq(peaked.argmax, 0, "peaked_delta argmax");
    expect_eq(peaked.max, static_cast<double>(transient_bytes(0)), "peaked_delta max");
    const auto& eval = t.reductions.at("eval_runtime");
    std::vector<int> odd;
    for (int r = 1; r < g_size; r += 2) odd.push_back(r);
    expect(eval.missing == odd, "eval_runtime missing on the odd ranks");
    expect_eq(eval.count, static_cast<double>(g_size - static_cast<int>(odd.size())),
              "eval_runtime count");
    expect_eq(t.reductions.at("tie").argmax, 1, "tie argmax is the lowest rank");
    expect(t.reductions.at("train_mem_cpu_alloc_delta").missing.empty(), "train missing none");
    std::printf("%s", t.format().c_str());
    std::printf("%s\n", t.to_json().c_str());
    std::fflush(stdout);
  }
  alloc.deallocate(kept);
}

// The same key set twice (the cached table), then a key only rank 2 has (a new table), on
// every rank (root = nullopt).
void changing_keys_test() {
  std::map<std::string, double> m{{"a", g_rank * 1.5}, {"b", -g_rank}};
  for (int round = 0; round < 2; ++round) {
    const auto t = memscope::mpi::gather(m, MPI_COMM_WORLD, std::nullopt);
    expect(t.has_value(), "root nullopt: every rank gets the table");
    if (t) expect_eq(t->reductions.at("b").argmax, 0, "b argmax");
  }
  if (g_rank == 2) m["only2"] = 7;
  const auto t = memscope::mpi::gather(m, MPI_COMM_WORLD, std::nullopt);
  if (!t) return;
  const auto& only2 = t->reductions.at("only2");
  expect(only2.count == 1 && only2.argmax == 2 && only2.max == 7, "only2 reduction");
  std::vector<int> others;
  for (int r = 0; r < g_size; ++r) {
    if (r != 2) others.push_back(r);
  }
  expect(only2.missing == others, "only2 missing on every other rank");
  expect_eq(t->reductions.at("a").max, (g_size - 1) * 1.5, "a max");
}

// Random key subsets and values, regenerated by every rank for every rank from a fixed seed,
// so each rank knows the exact table to expect. Rounds alternate between reusing the key
// set (cached table) and drawing a new one (table agreed again), and move the root around.
void randomized_test() {
  constexpr int kRounds = 30;
  const auto metrics_of = [](int rank, int round) {
    std::mt19937_64 rng(
        static_cast<std::uint64_t>(1000 * (round / 2) + rank));  // pairs of rounds share keys
    std::uniform_int_distribution<int> keep(0, 3);
    std::uniform_int_distribution<std::int64_t> bytes(-(std::int64_t{1} << 40),
                                                      std::int64_t{1} << 40);
    std::map<std::string, double> m;
    for (int k = 0; k < 12; ++k) {
      const std::int64_t v = bytes(rng) + round;  // values change every round, keys every two
      std::string key = "k";  // (not "k" + ...: GCC 12's -Wrestrict false positive)
      key += std::to_string(k);
      key += "_mem_gpu_alloc_delta";
      if (keep(rng) != 0) m[key] = static_cast<double>(v);
    }
    return m;
  };
  for (int round = 0; round < kRounds; ++round) {
    const std::optional<int> root =
        round % 3 == 2 ? std::nullopt : std::optional<int>(round % g_size);
    const auto t = memscope::mpi::gather(metrics_of(g_rank, round), MPI_COMM_WORLD, root,
                                         std::chrono::seconds(60));
    const bool receives = !root || *root == g_rank;
    expect(t.has_value() == receives, "round " + std::to_string(round) + ": table on root");
    if (!t) continue;
    std::vector<std::map<std::string, double>> all;
    all.reserve(static_cast<std::size_t>(g_size));
    for (int r = 0; r < g_size; ++r) all.push_back(metrics_of(r, round));
    expect_same(*t, memscope::mpi::reduce(all), "round " + std::to_string(round));
  }
}

// Not a test: the median time of 200 gathers of 32 keys to rank 0 after the key agreement, for
// docs/distributed.md (mpirun -np 4 --oversubscribe mpi_gather_main time).
void time_gathers() {
  std::map<std::string, double> m;
  for (int k = 0; k < 32; ++k) {
    std::string key = "k";
    key += std::to_string(k);
    m[key] = static_cast<double>(k * (g_rank + 1));
  }
  (void)memscope::mpi::gather(m);
  std::vector<double> us;
  for (int i = 0; i < 200; ++i) {
    const auto start = std::chrono::steady_clock::now();
    (void)memscope::mpi::gather(m);
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(us.begin(), us.end());
  if (g_rank == 0) {
    std::printf("gather of 32 keys on %d ranks to rank 0: median %.0f us, p90 %.0f us\n", g_size,
                us[us.size() / 2], us[us.size() * 9 / 10]);
  }
}

// What rank r of the mixed job gathers in round `round` (mixed_rank.py says the same): ints
// and fractions, a key per language, and new keys in later rounds (rank 3, a Python rank,
// grows the table in round 1; rank 1, a C++ rank, in round 2).
memscope::Metrics mixed_metrics(int r, int round) {
  const bool cpp = r < 2;
  memscope::Metrics m{{"shared_mem_delta", std::int64_t{r + 1} << 20},
                      {"step", std::int64_t{10 + r}},
                      {"loss", 0.25 * r},
                      {cpp ? "cpp_only_bytes" : "python_only_bytes", std::int64_t{1000 + r}}};
  if (round >= 1 && r == 3) m["only3"] = std::int64_t{7};
  if (round >= 2 && r == 1) m["only1"] = 0.5;
  return m;
}

void mixed_test() {
  for (int round = 0; round < 3; ++round) {
    const std::optional<int> root = round == 2 ? std::optional<int>(0) : std::nullopt;
    const auto t = memscope::mpi::gather(mixed_metrics(g_rank, round), MPI_COMM_WORLD, root,
                                         std::chrono::seconds(60));
    const std::string what = "mixed round " + std::to_string(round);
    expect(t.has_value() == (!root || *root == g_rank), what + ": table on the right ranks");
    if (!t) continue;
    std::vector<std::map<std::string, double>> all;
    all.reserve(static_cast<std::size_t>(g_size));
    for (int r = 0; r < g_size; ++r) {
      all.push_back(memscope::as_doubles(memscope::numeric_metrics(mixed_metrics(r, round))));
    }
    const auto want = memscope::reduce(all);
    expect_same(*t, want, what);
    expect(t->format() == want.format(), what + ": format()");
    expect(t->reductions.at("cpp_only_bytes").missing == std::vector<int>{2, 3},
           what + ": the C++ key is missing on the Python ranks");
    if (round >= 1) expect(t->reductions.at("only3").argmax == 3, what + ": only3 from rank 3");
    if (g_rank == 0 && round == 0) std::printf("%s", t->format().c_str());
  }
}

int leave_test(int leaver) {
  // One gather with everyone (the table gets cached), then `leaver` leaves.
  const auto first = memscope::mpi::gather(std::map<std::string, double>{{"x", g_rank}});
  if (g_rank == 0) expect(first && first->reductions.at("x").argmax == g_size - 1, "first gather");
  if (g_rank == leaver) {
    std::printf("rank %d: leaving without gathering\n", g_rank);
    std::fflush(stdout);
    MPI_Finalize();
    return 0;
  }
  // 5 s: the staying ranks left the first gather together, so all of them arrive well within
  // it even on a loaded machine; only the rank that left is missing.
  const auto start = std::chrono::steady_clock::now();
  try {
    (void)memscope::mpi::gather(std::map<std::string, double>{{"x", g_rank}}, MPI_COMM_WORLD, 0,
                                std::chrono::seconds(5));
    expect(false, "gather returned although rank " + std::to_string(leaver) + " left");
  } catch (const memscope::mpi::GatherTimeout& e) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    expect(e.missing_ranks() == std::vector<int>{leaver},
           "missing_ranks() names the rank that left: " + std::string(e.what()));
    if (e.missing_ranks() == std::vector<int>{leaver}) {
      std::printf("rank %d: TIMEOUT-OK after %lld ms: %s\n", g_rank, static_cast<long long>(ms),
                  e.what());
    }
  }
  std::fflush(stdout);
  // The communicator is not used again. MPI_Finalize ends this rank cleanly (the rank that left
  // has finalized already); MPI_Abort here made Open MPI 4.1's mpirun crash or hang at exit.
  MPI_Finalize();
  return g_failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  const std::string mode = argc > 1 ? argv[1] : "gather";
  if (g_size != 4) {  // the expectations below are written for 4 ranks
    if (g_rank == 0) std::printf("FAIL: run on 4 ranks (mpirun -np 4), not %d\n", g_size);
    MPI_Finalize();
    return 1;
  }
  try {
    if (mode == "leave") return leave_test(argc > 2 ? std::atoi(argv[2]) : g_size - 1);
    if (mode == "time") {
      time_gathers();
      MPI_Finalize();
      return 0;
    }
    if (mode == "mixed") {
      mixed_test();
    } else {
      stage_metrics_test();
      changing_keys_test();
      randomized_test();
    }
  } catch (const std::exception& e) {
    expect(false, std::string("exception: ") + e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);  // the other ranks may be waiting in a gather
  }
  int total = 0;
  MPI_Allreduce(&g_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) std::printf("mpi gather test: %d ranks, %d failures\n", g_size, total);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
