# Runs PROGRAM on 4 ranks with mpirun and checks what the ranks reported (mpi_gather_main.cpp).
#   ARGS=gather      every rank's checks passed: exit 0 and rank 0's "0 failures" line
#   ARGS=leave;<r>   every rank but <r> printed TIMEOUT-OK naming <r>, none printed FAIL, and
#                    the job ended cleanly (exit 0: every rank finalized)
# With MIXED=<script> ranks 2 and 3 run that Python script instead, with the same ARGS
# (ARGS=mixed: checked as gather), on the package the build assembled (PYTHONPATH; PACKAGE_BUILT
# says there is one). Without it, or where python3 cannot import mpi4py, numpy and memscope,
# the test says SKIPPED with the reason.
if(NOT MPIEXEC)
  message(FATAL_ERROR "mpirun not found: install openmpi-bin (scripts/bootstrap does)")
endif()
set(ranks -np 4 --oversubscribe ${PROGRAM} ${ARGS})
if(MIXED AND NOT PACKAGE_BUILT)
  message("SKIPPED: this build has no Python package (configure with MEMSCOPE_BUILD_PYTHON=ON, "
          "as make test does)")
  return()
elseif(MIXED)
  find_program(PYTHON3 python3)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env PYTHONPATH=${PYTHONPATH}
                          ${PYTHON3} -c "import mpi4py, numpy, memscope.distributed"
                  RESULT_VARIABLE missing ERROR_VARIABLE why)
  if(NOT PYTHON3 OR missing)
    message("SKIPPED: python3 cannot import mpi4py, numpy and memscope (scripts/bootstrap "
            "installs mpi4py; the package is built with MEMSCOPE_BUILD_PYTHON=ON): ${why}")
    return()
  endif()
  set(ranks -np 2 --oversubscribe ${PROGRAM} ${ARGS} : -np 2 ${PYTHON3} ${MIXED} ${ARGS})
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env PYTHONPATH=${PYTHONPATH} ${MPIEXEC} ${ranks}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "mpirun exit: ${rc}\n${out}\n${err}")
if(out MATCHES "FAIL")
  message(FATAL_ERROR "a rank reported a failure (FAIL lines above)")
endif()
list(GET ARGS 0 mode)
if(mode STREQUAL "gather" OR mode STREQUAL "mixed")
  if(NOT rc EQUAL 0 OR NOT out MATCHES "mpi gather test: 4 ranks, 0 failures")
    message(FATAL_ERROR "the 4-rank gather test failed (exit ${rc})")
  endif()
else()
  list(GET ARGS 1 leaver)
  foreach(rank 0 1 2 3)
    if(rank EQUAL leaver)
      continue()
    endif()
    if(NOT out MATCHES "rank ${rank}: TIMEOUT-OK after [0-9]+ ms: [^\n]*rank ${leaver}")
      message(FATAL_ERROR "rank ${rank} did not report a GatherTimeout naming rank ${leaver}")
    endif()
  endforeach()
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the ranks reported the timeout but the job did not end cleanly (exit ${rc})")
  endif()
endif()
