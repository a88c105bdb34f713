// memscope::mpi: stage metrics of every rank of an MPI job, gathered into one table with a
// reduction per key (the C++ side of memscope.distributed; docs/distributed.md).
//
//   MPI_Init(&argc, &argv);
//   ...                                   // each rank runs its stages
//   memscope::Metrics m;
//   tracker.update_metrics("train", m);
//   if (auto table = memscope::mpi::gather(m)) std::puts(table->format().c_str());  // rank 0
//
// Built only when CMake found MPI (target memscope::mpi; find_package(memscope COMPONENTS mpi)).
//
// Semantics, the same as Python's memscope.distributed.gather(), whose ranks may share the job
// (an MPMD mpirun): the table and its reduction are rank_table.hpp's, the payload is
// rank_payload.hpp's (values travel as float64: integers are exact up to 2^53, 8 PiB as bytes).
//
// Cost: the key table (the sorted union of every rank's keys) is agreed with an
// MPI_Iallgather of the key blobs' lengths and an MPI_Iallgatherv of the blobs, and cached on
// the communicator (an MPI attribute, freed with it). Afterwards a gather is one MPI_Iallgather
// of a fixed-size float64 row per rank. If any rank's keys do not fit, every rank sees it in the
// same gather and all agree a grown table and gather again. Beside the collectives, every rank
// sends rank 0 its gather number (int64, tag 32760 on `comm`), so a timeout can name the ranks
// that never came.
// (No private duplicate of `comm`: MPI_Comm_dup is a collective that could hang. A program
// receiving with MPI_ANY_TAG on `comm` while a gather runs could take memscope's messages.)
//
// Timeout: MPI has no collective timeout, so the collectives are non-blocking and polled until
// `timeout` has passed since this rank entered gather(). Rank 0 then names the ranks whose
// "arrived" message it has not received, tells every rank that did arrive (tag 32761), and
// every one of them throws GatherTimeout with that list. A rank that hears nothing from rank 0
// within twice the timeout names rank 0. After a GatherTimeout the communicator still holds
// the abandoned requests and is unusable: do not gather or communicate on it again; end the
// rank (MPI_Finalize; with Open MPI 4.1 this ends the job cleanly once the missing rank has
// finalized or exited) or the whole job (MPI_Abort).
//
// Thread safety: like any MPI collective, call gather() on a communicator from one thread at
// a time on every rank, in the same order as the other collectives on it. reduce(), format()
// and to_json() are pure.
// Errors: UsageError when MPI is not initialised (call MPI_Init first) or already finalised,
// for a root outside the communicator, a timeout <= 0, a NaN value, an integer beyond 2^53 or
// a key holding a NUL character; GatherTimeout as above; BackendError when an MPI call returns
// an error. Input errors are thrown before any communication, on the rank with the bad input
// only: the other ranks then get a GatherTimeout naming it.
#pragma once

#include <mpi.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "memscope/errors.hpp"
#include "memscope/metrics.hpp"
#include "memscope/rank_table.hpp"

namespace memscope::mpi {

// The table and its reduction live in the core (rank_table.hpp), shared with Python.
using memscope::RankTable;
using memscope::reduce;
using memscope::Reduction;

// Thrown on every rank that arrived when some rank did not reach the gather in time.
class GatherTimeout : public Error {
 public:
  GatherTimeout(const std::string& message, std::vector<int> missing_ranks)
      : Error(message), missing_ranks_(std::move(missing_ranks)) {}
  // The ranks (in the communicator) that did not arrive; ascending.
  [[nodiscard]] const std::vector<int>& missing_ranks() const noexcept { return missing_ranks_; }

 private:
  std::vector<int> missing_ranks_;
};

// Collective over `comm`: every rank passes its metrics. Returns the table on `root`
// (std::nullopt elsewhere), or on every rank when root is std::nullopt.
[[nodiscard]] std::optional<RankTable> gather(
    const std::map<std::string, double>& metrics, MPI_Comm comm = MPI_COMM_WORLD,
    std::optional<int> root = 0,
    std::chrono::milliseconds timeout = std::chrono::milliseconds(300'000));

// The same for a tracker's metrics (MemoryTracker::update_metrics): numbers are gathered,
// text values ({stage}_mem_{label}_mode) are left out; integers travel flagged as integers
// (a Python rank gets them as int).
[[nodiscard]] std::optional<RankTable> gather(
    const Metrics& metrics, MPI_Comm comm = MPI_COMM_WORLD, std::optional<int> root = 0,
    std::chrono::milliseconds timeout = std::chrono::milliseconds(300'000));

}  // namespace memscope::mpi
