# The target memscope_gpu_bundle builds what a GPU machine without memscope's build dependencies
# runs (scripts/gpu-check --bundle), and gpu-bundle.txt in the build folder lists it, one
# "<kind> <file>" per line: `test` for a GoogleTest binary labelled gpu (its gtest
# <name>[1]_tests.cmake lies beside it), `program` for the demo, the command, its run child and
# memscope_gpu_peers and memscope_cuda_driver_costs. Only targets this configuration builds are
# listed.
get_property(memscope_gpu_tests GLOBAL PROPERTY MEMSCOPE_GPU_TEST_TARGETS)
set(memscope_gpu_bundle_lines "")
set(memscope_gpu_bundle_targets "")
foreach(target ${memscope_gpu_tests})
  string(APPEND memscope_gpu_bundle_lines "test $<TARGET_FILE:${target}>\n")
  list(APPEND memscope_gpu_bundle_targets ${target})
endforeach()
foreach(target memscope_demo memscope_command memscope_run_child memscope_gpu_peers
               memscope_cuda_driver_costs)
  if(TARGET ${target})
    string(APPEND memscope_gpu_bundle_lines "program $<TARGET_FILE:${target}>\n")
    list(APPEND memscope_gpu_bundle_targets ${target})
  endif()
endforeach()
file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/gpu-bundle.txt CONTENT "${memscope_gpu_bundle_lines}")
add_custom_target(memscope_gpu_bundle DEPENDS ${memscope_gpu_bundle_targets})
