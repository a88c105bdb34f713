# Installs the built library into a scratch prefix, builds tests/install as a separate
# project against it with find_package(memscope), runs the example and checks its output.
set(prefix ${WORK}/prefix)
file(REMOVE_RECURSE ${WORK})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD} --prefix ${prefix} RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "install failed")
endif()
# The memscope command is installed too (bin/memscope), and runs from there.
if(EXISTS ${BUILD}/tools/memscope)
  execute_process(COMMAND ${prefix}/bin/memscope --version RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE out)
  if(rc OR NOT out MATCHES "^memscope [0-9]")
    message(FATAL_ERROR "the installed bin/memscope --version failed (${rc}):\n${out}")
  endif()
endif()
# MPI: memscope was built with memscope::mpi (MPI=ON), so the consumer asks for the component.
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE}/tests/install -B ${WORK}/consumer
                -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release
                -DMEMSCOPE_EXAMPLE=${SOURCE}/examples/usage.cpp -DMEMSCOPE_EXPECT_MPI=${MPI}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc)
  message(FATAL_ERROR "find_package(memscope) failed:\n${out}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK}/consumer RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc)
  message(FATAL_ERROR "building against the installed package failed:\n${out}")
endif()
execute_process(COMMAND ${WORK}/consumer/usage RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(rc)
  message(FATAL_ERROR "the example failed:\n${out}")
endif()
foreach(expected "step peak: 3758096384 bytes" "536870912 allocated, 3758096384 reserved" "3221225472 bytes released")
  string(FIND "${out}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "expected '${expected}' in:\n${out}")
  endif()
endforeach()
message(STATUS "${out}")

if(MPI)
  # One rank, without mpirun (Open MPI's singleton mode): the installed component links and runs.
  execute_process(COMMAND ${WORK}/consumer/mpi_usage RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE out)
  if(rc OR NOT out MATCHES "\"world_size\":1")
    message(FATAL_ERROR "the installed memscope::mpi program failed (${rc}):\n${out}")
  endif()
  # A package built without MPI: no memscopeMpiTargets.cmake. Asking for the component must
  # fail, saying why and what to do.
  file(GLOB mpi_exports ${prefix}/lib*/cmake/memscope/memscopeMpiTargets*.cmake)
  file(REMOVE ${mpi_exports})
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE}/tests/install -B ${WORK}/consumer-no-mpi
                  -DCMAKE_PREFIX_PATH=${prefix} -DMEMSCOPE_EXAMPLE=${SOURCE}/examples/usage.cpp
                  -DMEMSCOPE_EXPECT_MPI=ON
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc EQUAL 0 OR NOT out MATCHES "memscope was built without MPI")
    message(FATAL_ERROR "find_package(memscope COMPONENTS mpi) without the component should "
                        "fail naming the reason (exit ${rc}):\n${out}")
  endif()
endif()
