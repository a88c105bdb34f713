// gather(): the key table agreed once per (communicator, key set) and cached on the
// communicator, then one fixed-size float64 vector per rank (include/memscope/mpi.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "exchange.hpp"
#include "memscope/errors.hpp"
#include "memscope/mpi.hpp"

namespace memscope::mpi {

namespace {

using detail::check;
using detail::Exchange;

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

void check_input(const std::map<std::string, double>& metrics, MPI_Comm comm,
                 std::optional<int> root, std::chrono::milliseconds timeout, int size) {
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
  for (const auto& [key, value] : metrics) {
    if (std::isnan(value)) {
      throw UsageError(fmt::format(
          "memscope::mpi::gather: metric '{}' is NaN; NaN marks a missing key in the gathered "
          "payload, so leave the key out instead",
          key));
    }
    if (key.find('\0') != std::string::npos) {
      throw UsageError(fmt::format(
          "memscope::mpi::gather: metric key '{}' holds a NUL character, which separates keys "
          "in the key table; rename it",
          key));
    }
  }
}

// Every rank's key set, gathered once (lengths, then the bytes): the sorted union.
std::vector<std::string> agree_keys(Exchange& ex, const std::map<std::string, double>& metrics) {
  std::string blob;
  for (const auto& [key, value] : metrics) (blob += key) += '\0';
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
  std::set<std::string> keys;
  std::size_t begin = 0;
  for (std::size_t end = all.find('\0'); end != std::string::npos; end = all.find('\0', begin)) {
    keys.emplace(all, begin, end - begin);
    begin = end + 1;
  }
  return {keys.begin(), keys.end()};
}

// One float64 row per rank: [keys fit the table ? 1 : 0, value per table key or NaN].
// Returns the rows, or nothing when some rank's keys do not fit (every rank sees the same).
std::optional<std::vector<double>> gather_values(Exchange& ex,
                                                 const std::vector<std::string>& table,
                                                 const std::map<std::string, double>& metrics) {
  const std::size_t width = table.size() + 1;
  std::vector<double> row(width, std::numeric_limits<double>::quiet_NaN());
  std::size_t placed = 0;
  for (std::size_t i = 0; i < table.size(); ++i) {
    const auto it = metrics.find(table[i]);
    if (it == metrics.end()) continue;
    row[i + 1] = it->second;
    ++placed;
  }
  row[0] = placed == metrics.size() ? 1.0 : 0.0;
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
  for (std::size_t r = 0; r < static_cast<std::size_t>(ex.size()); ++r) {
    if (rows[r * width] != 1.0) return std::nullopt;
  }
  return rows;
}

}  // namespace

std::optional<RankTable> gather(const std::map<std::string, double>& metrics, MPI_Comm comm,
                                std::optional<int> root, std::chrono::milliseconds timeout) {
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
    cache.table = agree_keys(ex, metrics);
    rows = gather_values(ex, *cache.table, metrics);
    if (!rows) {  // cannot happen: the table is the union of the keys every rank just sent
      throw BackendError("memscope::mpi::gather: a rank's keys did not fit the table just agreed");
    }
  }
  ex.finish();
  if (root && *root != ex.rank()) return std::nullopt;

  const std::vector<std::string>& table = *cache.table;
  const std::size_t width = table.size() + 1;
  std::vector<std::map<std::string, double>> ranks(static_cast<std::size_t>(size));
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    for (std::size_t i = 0; i < table.size(); ++i) {
      const double v = (*rows)[r * width + i + 1];
      if (!std::isnan(v)) ranks[r].emplace(table[i], v);
    }
  }
  return reduce(std::move(ranks));
}

std::optional<RankTable> gather(const Metrics& metrics, MPI_Comm comm, std::optional<int> root,
                                std::chrono::milliseconds timeout) {
  std::map<std::string, double> numbers;
  for (const auto& [key, value] : metrics) {
    if (const auto* i = std::get_if<std::int64_t>(&value)) {
      numbers.emplace(key, static_cast<double>(*i));
    } else if (const auto* d = std::get_if<double>(&value)) {
      numbers.emplace(key, *d);
    }
  }
  return gather(numbers, comm, root, timeout);
}

}  // namespace memscope::mpi
