// A user's MPI program built against the installed memscope::mpi (find_package(memscope
// COMPONENTS mpi)); run by the install test as a single rank (Open MPI's singleton mode).
#include <mpi.h>

#include <cstdio>
#include <map>
#include <memscope/mpi.hpp>
#include <string>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const auto table =
      memscope::mpi::gather(std::map<std::string, double>{{"train_mem_cpu_alloc_delta", 4096}});
  if (table) std::printf("%s\n", table->to_json().c_str());
  MPI_Finalize();
  return table ? 0 : 1;
}
