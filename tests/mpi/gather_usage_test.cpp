// memscope::mpi without mpirun: the error when MPI was never initialised (this binary never
// calls MPI_Init), and mpi.hpp's names for the core's table.
#include <gtest/gtest.h>

#include <map>
#include <memscope/mpi.hpp>
#include <string>
#include <type_traits>

namespace {

TEST(MpiGather, RefusesToRunBeforeMpiInit) {
  try {
    (void)memscope::mpi::gather(std::map<std::string, double>{{"a", 1}});
    FAIL() << "gather() ran without MPI_Init";
  } catch (const memscope::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("MPI_Init"), std::string::npos) << e.what();
  }
}

TEST(MpiGather, KeepsItsNamesForTheCoreTable) {
  static_assert(std::is_same_v<memscope::mpi::RankTable, memscope::RankTable>);
  static_assert(std::is_same_v<memscope::mpi::Reduction, memscope::Reduction>);
  EXPECT_EQ(memscope::mpi::reduce({{{"a", 1}}}).reductions.at("a").argmax, 0);
}

}  // namespace
