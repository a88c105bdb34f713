# memscope_test_costs(): the tests that take over 10 s, with the seconds they took, as ctest's
# COST. ctest -j starts the costliest first; without it, a fresh build folder (no
# Testing/Temporary/CTestCostData.txt yet) starts them in the order they were defined, and the
# Python and distributed ones, defined last, ran alone at the end of `make test`: over half a
# minute of one idle core (2026-12-07). After the first run ctest's own measured costs take over.
# Call it in each folder that defines tests (set_tests_properties reaches only that folder's);
# names that folder does not define are passed over.
set(MEMSCOPE_TEST_COSTS
    # seconds measured by `make test` on a fresh clone, 2-core machine, idle, 2026-12-07
    python_distributed_tests=69 python_test_estimate_hf=44 cli_test_estimate=38 cli_test_html=28
    python_test_viewer=24 python_test_hf=15 cli_test_run_distributed=14 cli_test_demo=12
    python_test_estimate_reliability=12 mpi_cpp_python_leave_0_4ranks=11 python_test_estimate=11
    mpi_leave_0_4ranks=11)

function(memscope_test_costs)
  foreach(entry IN LISTS MEMSCOPE_TEST_COSTS)
    string(REPLACE "=" ";" pair ${entry})
    list(GET pair 0 test)
    list(GET pair 1 seconds)
    if(TEST ${test})
      set_tests_properties(${test} PROPERTIES COST ${seconds})
    endif()
  endforeach()
endfunction()
