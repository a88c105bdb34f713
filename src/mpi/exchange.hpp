// One gather call's traffic with a deadline: the "arrived" messages to rank 0 and the polling
// of non-blocking collectives until they finish or the timeout turns into a GatherTimeout that
// names the ranks that never arrived (the protocol is described in include/memscope/mpi.hpp).
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <string_view>
#include <vector>

namespace memscope::mpi::detail {

class Exchange {
 public:
  // Posts this rank's arrival (rank 0: receives for everyone else's). `call` numbers the
  // gathers on this communicator, the same on every rank.
  Exchange(MPI_Comm comm, std::chrono::milliseconds timeout, std::int64_t call);
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;
  ~Exchange() noexcept = default;

  [[nodiscard]] MPI_Comm comm() const noexcept { return comm_; }
  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }

  // Polls `request` (a non-blocking collective; `what` names it for errors) until it completes;
  // past the deadline, throws GatherTimeout on every rank that arrived.
  void wait(MPI_Request& request, std::string_view what);
  // After the last collective succeeded: completes the arrival messages (they are all
  // matched by then, so this cannot block for long).
  void finish();

 private:
  [[noreturn]] void time_out_as_coordinator(std::string_view what);
  [[noreturn]] void time_out_from_verdict();

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 0;
  std::chrono::milliseconds timeout_;
  std::chrono::steady_clock::time_point deadline_;
  std::int64_t call_;
  std::int64_t arrival_out_;               // what this rank sends rank 0
  std::vector<std::int64_t> arrivals_in_;  // rank 0: what each rank sent
  std::vector<MPI_Request> arrival_requests_;
};

// Throws BackendError naming `what` when an MPI call did not return MPI_SUCCESS.
void check(int rc, std::string_view what);

}  // namespace memscope::mpi::detail
