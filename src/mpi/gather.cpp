// gather(): MPI's transport for the core's wire format (memscope/rank_payload.hpp): the key
// table agreed once per (communicator, key set) and cached on the communicator, then one
// fixed-size float64 row per rank (include/memscope/mpi.hpp).
#include <fmt/format.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "exchange.hpp"
#include "memscope/errors.hpp"
#include "memscope/mpi.hpp"
#include "memscope/rank_payload.hpp"

namespace memscope::mpi {

namespace {

using detail::check;
using detail::Exchange;

constexpr std::string_view kCaller = "memscope::mpi::gather";

// ex.wait() has completed `request` (it is MPI_REQUEST_NULL now), so this MPI_Wait returns at
// once; it states the completion where clang's MPI checker can see it.
void done(MPI_Request& request) {
  check(MPI_Wait(&request, MPI_STATUS_IGNORE), "MPI_Wait");
}

// What memscope keeps on a communicator between gathers. MPI_COMM_NULL_COPY_FN: a duplicate
// communicator starts without a table (its ranks agree their own).
struct CommCache {
  std::optional<std::vector<std::string>> table;  // sorted; agreed by every rank together
  std::int64_t calls = 0;
};

int delete_cache(MPI_Comm /*comm*/, int /*keyval*/, void* value, void* /*extra*/) {
  delete static_cast<CommCache*>(value);  // NOLINT(cppcoreguidelines-owning-memory): MPI owns
  return MPI_SUCCESS;
}

CommCache& cache_of(MPI_Comm comm) {
  // MPI cannot be initialised twice, so one key value serves the whole process.
  static const int keyval = [] {
    int key = MPI_KEYVAL_INVALID;
    check(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_cache, &key, nullptr),
          "MPI_Comm_create_keyval");
    return key;
  }();
  void* value = nullptr;
  int found = 0;
  check(MPI_Comm_get_attr(comm, keyval, &value, &found), "MPI_Comm_get_attr");
  if (found != 0) return *static_cast<CommCache*>(value);
  auto cache = std::make_unique<CommCache>();
  check(MPI_Comm_set_attr(comm, keyval, cache.get()), "MPI_Comm_set_attr");
  return *cache.release();  // from now on the communicator owns it (delete_cache)
}

void check_input(const RankMetrics& metrics, MPI_Comm comm, std::optional<int> root,
                 std::chrono::milliseconds timeout, int size) {
  if (comm == MPI_COMM_NULL) {
    throw UsageError(
        "memscope::mpi::gather: comm is MPI_COMM_NULL; pass a communicator this "
        "rank belongs to (MPI_COMM_WORLD by default)");
  }
  if (root && (*root < 0 || *root >= size)) {
    throw UsageError(fmt::format(
        "memscope::mpi::gather: root {} is not a rank of the communicator (ranks 0 to {}); pass "
        "one of them, or std::nullopt for the table on every rank",
        *root, size - 1));
  }
  if (timeout.count() <= 0) {
    throw UsageError(fmt::format(
        "memscope::mpi::gather: timeout {} ms must be positive (it bounds the wait for the "
        "other ranks)",
        timeout.count()));
  }
  check_rank_metrics(metrics, kCaller);
}

// Every rank's key blob, gathered once (lengths, then the bytes): the grown table.
std::vector<std::string> agree_keys(Exchange& ex, const std::vector<std::string>& table,
                                    const RankMetrics& metrics) {
  const std::string blob = key_blob(metrics);
  if (blob.size() > static_cast<std::size_t>(INT_MAX)) {
    throw UsageError("memscope::mpi::gather: the metric keys of this rank exceed 2 GiB");
  }
  const auto size = static_cast<std::size_t>(ex.size());
  int length = static_cast<int>(blob.size());
  std::vector<int> lengths(size);
  MPI_Request request = MPI_REQUEST_NULL;
  check(MPI_Iallgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, ex.comm(), &request),
        "MPI_Iallgather (key lengths)");
  ex.wait(request, "key table exchange");
  done(request);
  std::vector<int> displacements(size);
  long long total = 0;
  for (std::size_t r = 0; r < size; ++r) {
    if (total > INT_MAX) break;
    displacements[r] = static_cast<int>(total);
    total += lengths[r];
  }
  if (total > INT_MAX) {
    // Every rank sees the same lengths, so every rank refuses together.
    throw UsageError(fmt::format(
        "memscope::mpi::gather: the key sets of all ranks add up to {} bytes, more than one MPI "
        "message holds (2 GiB); gather fewer or shorter keys",
        total));
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  check(MPI_Iallgatherv(blob.data(), length, MPI_CHAR, all.data(), lengths.data(),
                        displacements.data(), MPI_CHAR, ex.comm(), &request),
        "MPI_Iallgatherv (keys)");
  ex.wait(request, "key table exchange");
  done(request);
  return agree_table(table, all);
}

// Every rank's payload row; nothing when some rank's keys do not fit (every rank sees the same).
std::optional<std::vector<double>> gather_values(Exchange& ex,
                                                 const std::vector<std::string>& table,
                                                 const RankMetrics& metrics) {
  std::vector<double> row = encode_payload(table, metrics, kCaller);
  const std::size_t width = row.size();
  if (width * static_cast<std::size_t>(ex.size()) > static_cast<std::size_t>(INT_MAX)) {
    throw UsageError("memscope::mpi::gather: keys x ranks exceed what one MPI message holds");
  }
  std::vector<double> rows(width * static_cast<std::size_t>(ex.size()));
  MPI_Request request = MPI_REQUEST_NULL;
  check(MPI_Iallgather(row.data(), static_cast<int>(width), MPI_DOUBLE, rows.data(),
                       static_cast<int>(width), MPI_DOUBLE, ex.comm(), &request),
        "MPI_Iallgather (values)");
  ex.wait(request, "gather");
  done(request);
  if (!payload_fits(rows, table.size())) return std::nullopt;
  return rows;
}

std::optional<RankTable> gather_numbers(const RankMetrics& metrics, MPI_Comm comm,
                                        std::optional<int> root,
                                        std::chrono::milliseconds timeout) {
  int initialised = 0;
  int finalised = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalised);
  if (initialised == 0 || finalised != 0) {
    throw UsageError(fmt::format(
        "memscope::mpi::gather: MPI is {}; call MPI_Init (or MPI_Init_thread) first and gather "
        "before MPI_Finalize",
        initialised == 0 ? "not initialised" : "already finalised"));
  }
  int size = 0;
  if (comm != MPI_COMM_NULL) check(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  check_input(metrics, comm, root, timeout, size);

  CommCache& cache = cache_of(comm);
  Exchange ex(comm, timeout, ++cache.calls);
  std::optional<std::vector<double>> rows;
  if (cache.table) rows = gather_values(ex, *cache.table, metrics);
  if (!rows) {
    cache.table = agree_keys(ex, cache.table.value_or(std::vector<std::string>{}), metrics);
    rows = gather_values(ex, *cache.table, metrics);
    if (!rows) {  // cannot happen: the table holds every key every rank just sent
      throw BackendError("memscope::mpi::gather: a rank's keys did not fit the table just agreed");
    }
  }
  ex.finish();
  if (root && *root != ex.rank()) return std::nullopt;
  std::vector<std::map<std::string, double>> ranks;
  for (const auto& rank : decode_payload(*rows, *cache.table)) ranks.push_back(as_doubles(rank));
  return reduce(std::move(ranks));
}

}  // namespace

std::optional<RankTable> gather(const std::map<std::string, double>& metrics, MPI_Comm comm,
                                std::optional<int> root, std::chrono::milliseconds timeout) {
  return gather_numbers(RankMetrics(metrics.begin(), metrics.end()), comm, root, timeout);
}

std::optional<RankTable> gather(const Metrics& metrics, MPI_Comm comm, std::optional<int> root,
                                std::chrono::milliseconds timeout) {
  return gather_numbers(numeric_metrics(metrics), comm, root, timeout);
}

}  // namespace memscope::mpi
