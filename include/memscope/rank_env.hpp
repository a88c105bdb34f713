// Which rank of a distributed job a process is, from the environment its launcher gave it
// (/proc/<pid>/environ): torchrun sets RANK, LOCAL_RANK, WORLD_SIZE and LOCAL_WORLD_SIZE; Open
// MPI's mpirun OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_SIZE and
// OMPI_COMM_WORLD_LOCAL_SIZE; MPICH / Intel MPI (Hydra) and Slurm's PMI PMI_RANK and PMI_SIZE
// (MPI_LOCALRANKID for the local rank).
//
// The rank is the first of RANK, OMPI_COMM_WORLD_RANK, PMI_RANK that is set, else LOCAL_RANK
// (a job on one node, where local and global ranks agree). The local rank is kept on its own,
// so a multi-node job shows both.
//
// /proc/<pid>/environ is the environment the process was exec'd with; a variable it sets
// afterwards is not seen. Reading it needs the same rights as ptrace (same user).
//
// Thread safety: pure functions. Ownership: values. Errors: none; a value that is not a number >= 0
// counts as not set, and an environ that cannot be read (the process ended, no permission) gives an
// empty RankEnv.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace memscope {

struct RankEnv {
  std::optional<int> rank;
  std::string rank_variable;  // the variable the rank came from ("RANK", "PMI_RANK"...)
  std::optional<int> local_rank;
  std::optional<int> world_size;
  std::optional<int> local_world_size;
};

// The rank variables of an environ block: "NAME=value" entries separated by '\0'.
[[nodiscard]] RankEnv parse_rank_env(std::string_view environ_block);

// The rank variables of process `pid` (/proc/<pid>/environ); empty when unreadable.
[[nodiscard]] RankEnv read_rank_env(int pid);

}  // namespace memscope
