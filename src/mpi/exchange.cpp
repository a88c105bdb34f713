#include "exchange.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstddef>
#include <string>
#include <thread>

#include "memscope/errors.hpp"
#include "memscope/mpi.hpp"

namespace memscope::mpi::detail {

namespace {

// Tags of memscope's point-to-point messages on the caller's communicator: near the top of
// the range every MPI library must offer (MPI_TAG_UB >= 32767), away from the small tags
// programs usually pick. Collectives travel in their own context and cannot collide.
constexpr int kArriveTag = 32760;
constexpr int kVerdictTag = 32761;

using Clock = std::chrono::steady_clock;

// Spins briefly (a gather among ranks that all arrived finishes in microseconds), then
// sleeps between polls so waiting ranks leave the cores to the ranks still computing; the
// MPI_Test calls themselves drive the library's progress.
class Backoff {
 public:
  void pause() {
    if (++polls_ > 200) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }

 private:
  int polls_ = 0;
};

std::string timeout_message(const std::vector<int>& missing, std::chrono::milliseconds timeout,
                            std::string_view what) {
  const std::string after =
      " The communicator still holds the abandoned requests and is unusable: do not gather or "
      "communicate on it again; end this rank (MPI_Finalize, or MPI_Abort for the whole job).";
  if (missing.empty()) {
    return fmt::format(
        "memscope::mpi::gather: every rank arrived but the {} did not finish within {} ms (a "
        "rank may have failed during the gather).{}",
        what, timeout.count(), after);
  }
  return fmt::format(
      "memscope::mpi::gather: rank{} {} did not reach the gather within {} ms (rank 0 waited "
      "for {} arrival).{}",
      missing.size() == 1 ? "" : "s", fmt::join(missing, ", "), timeout.count(),
      missing.size() == 1 ? "its" : "their", after);
}

}  // namespace

void check(int rc, std::string_view what) {
  if (rc == MPI_SUCCESS) return;
  std::string text(MPI_MAX_ERROR_STRING, '\0');
  int length = 0;
  MPI_Error_string(rc, text.data(), &length);
  text.resize(static_cast<std::size_t>(length));
  throw BackendError(fmt::format("memscope::mpi::gather: {} failed: {}", what, text));
}

Exchange::Exchange(MPI_Comm comm, std::chrono::milliseconds timeout, std::int64_t call)
    : comm_(comm),
      timeout_(timeout),
      deadline_(Clock::now() + timeout),
      call_(call),
      arrival_out_(call) {
  check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  if (rank_ == 0) {
    arrivals_in_.assign(static_cast<std::size_t>(size_), -1);
    arrival_requests_.assign(static_cast<std::size_t>(size_), MPI_REQUEST_NULL);
    for (int r = 1; r < size_; ++r) {
      const auto i = static_cast<std::size_t>(r);
      check(
          MPI_Irecv(&arrivals_in_[i], 1, MPI_INT64_T, r, kArriveTag, comm_, &arrival_requests_[i]),
          "MPI_Irecv (arrival)");
    }
  } else {
    arrival_requests_.assign(1, MPI_REQUEST_NULL);
    check(MPI_Isend(&arrival_out_, 1, MPI_INT64_T, 0, kArriveTag, comm_, arrival_requests_.data()),
          "MPI_Isend (arrival)");
  }
}

void Exchange::wait(MPI_Request& request, std::string_view what) {
  Backoff backoff;
  for (;;) {
    int done = 0;
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what);
    if (done != 0) return;
    const auto now = Clock::now();
    if (rank_ == 0) {
      if (now >= deadline_) time_out_as_coordinator(what);
    } else {
      int verdict = 0;
      check(MPI_Iprobe(0, kVerdictTag, comm_, &verdict, MPI_STATUS_IGNORE), "MPI_Iprobe");
      if (verdict != 0) time_out_from_verdict();
      // Rank 0 answers at its own deadline, which is later than ours when it arrived later;
      // silence for a second timeout means rank 0 itself is not there.
      if (now >= deadline_ + timeout_) {
        throw GatherTimeout(
            fmt::format("memscope::mpi::gather: rank 0, which collects the arrivals, did not "
                        "answer within 2 x {} ms: it did not reach the gather (other ranks may "
                        "be missing too). The communicator still holds the abandoned requests "
                        "and is unusable: do not gather or communicate on it again; end this "
                        "rank (MPI_Finalize, or MPI_Abort for the whole job).",
                        timeout_.count()),
            {0});
      }
    }
    backoff.pause();
  }
}

void Exchange::time_out_as_coordinator(std::string_view what) {
  std::vector<int> missing;
  for (int r = 1; r < size_; ++r) {
    auto& request = arrival_requests_[static_cast<std::size_t>(r)];
    int arrived = 0;
    check(MPI_Test(&request, &arrived, MPI_STATUS_IGNORE), "MPI_Test (arrival)");
    if (arrived == 0) missing.push_back(r);
  }
  // The verdict: [call, missing ranks...] to every rank that arrived, so they throw the same
  // error instead of waiting for their own deadline.
  std::vector<std::int64_t> verdict{call_};
  for (const int r : missing) verdict.push_back(r);
  std::vector<MPI_Request> sends;
  for (int r = 1; r < size_; ++r) {
    if (arrival_requests_[static_cast<std::size_t>(r)] != MPI_REQUEST_NULL) continue;
    sends.push_back(MPI_REQUEST_NULL);
    check(MPI_Isend(verdict.data(), static_cast<int>(verdict.size()), MPI_INT64_T, r, kVerdictTag,
                    comm_, &sends.back()),
          "MPI_Isend (verdict)");
  }
  // Small messages leave at once; poll a bounded while so a program that aborts right after
  // catching the error does not cut them off.
  const auto send_deadline = Clock::now() + std::chrono::seconds(5);
  Backoff backoff;
  for (;;) {
    int sent = 0;
    check(MPI_Testall(static_cast<int>(sends.size()), sends.data(), &sent, MPI_STATUSES_IGNORE),
          "MPI_Testall (verdict)");
    if (sent != 0 || Clock::now() >= send_deadline) break;
    backoff.pause();
  }
  throw GatherTimeout(timeout_message(missing, timeout_, what), missing);
}

void Exchange::time_out_from_verdict() {
  MPI_Status status;
  check(MPI_Probe(0, kVerdictTag, comm_, &status), "MPI_Probe (verdict)");
  int count = 0;
  check(MPI_Get_count(&status, MPI_INT64_T, &count), "MPI_Get_count (verdict)");
  std::vector<std::int64_t> verdict(static_cast<std::size_t>(count));
  check(MPI_Recv(verdict.data(), count, MPI_INT64_T, 0, kVerdictTag, comm_, MPI_STATUS_IGNORE),
        "MPI_Recv (verdict)");
  std::vector<int> missing;
  for (std::size_t i = 1; i < verdict.size(); ++i) missing.push_back(static_cast<int>(verdict[i]));
  throw GatherTimeout(timeout_message(missing, timeout_, "gather"), missing);
}

void Exchange::finish() {
  check(MPI_Waitall(static_cast<int>(arrival_requests_.size()), arrival_requests_.data(),
                    MPI_STATUSES_IGNORE),
        "MPI_Waitall (arrivals)");
  for (std::size_t r = 1; r < arrivals_in_.size(); ++r) {
    if (arrivals_in_[r] != call_) {
      throw BackendError(fmt::format(
          "memscope::mpi::gather: rank {} sent arrival of gather #{} during gather #{}: the "
          "ranks called gather() on this communicator a different number of times",
          r, arrivals_in_[r], call_));
    }
  }
}

}  // namespace memscope::mpi::detail
