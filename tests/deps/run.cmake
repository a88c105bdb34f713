# The fallback of cmake/Dependencies.cmake, tested without a network: configures memscope with
# FETCHCONTENT_TRY_FIND_PACKAGE_MODE=NEVER (as on a machine without Debian's packages) and every
# URL pointed at a local copy: fmt, nlohmann_json and CLI11 as small CMake projects made from
# the headers Debian installed here (each with the upstream project's target names), Chart.js
# as Debian's chart.min.js under the real pinned SHA256 (Debian's file is the npm release's
# byte for byte, so this also checks the pin). Then it checks that each was fetched and checked,
# that the build uses the fetched copies, and compiles (syntax only) one file of the memscope
# command that includes all three libraries. About a minute on a loaded 2-core machine.
#   cmake -DSOURCE=<repo> -DWORK=<scratch> [-DCXX_LAUNCHER=ccache] -P tests/deps/run.cmake
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/copies)

cmake_policy(SET CMP0007 NEW)
# Per library: the folder in the tarball, the header folder under /usr/include, upstream's target
# and its aliases.
set(fmt_folder fmt-9.1.0)
set(fmt_headers fmt)
set(fmt_target fmt-header-only)
set(fmt_aliases fmt::fmt-header-only fmt::fmt)
set(json_folder json-3.11.2)
set(json_headers nlohmann)
set(json_target nlohmann_json)
set(json_aliases nlohmann_json::nlohmann_json)
set(cli11_folder CLI11-2.1.2)
set(cli11_headers CLI)
set(cli11_target CLI11)
set(cli11_aliases CLI11::CLI11)
set(defines)
foreach(dep fmt json cli11)
  set(folder ${${dep}_folder})
  set(headers ${${dep}_headers})
  set(target ${${dep}_target})
  set(aliases ${${dep}_aliases})
  if(NOT EXISTS /usr/include/${headers})
    message(FATAL_ERROR "/usr/include/${headers} is missing: scripts/bootstrap installs it")
  endif()
  set(project "cmake_minimum_required(VERSION 3.25)\nproject(${dep}_copy LANGUAGES CXX)\n")
  string(APPEND project "add_library(${target} INTERFACE)\n"
         "target_include_directories(${target} INTERFACE \${CMAKE_CURRENT_SOURCE_DIR}/include)\n")
  if(dep STREQUAL "fmt")
    string(APPEND project "target_compile_definitions(${target} INTERFACE FMT_HEADER_ONLY=1)\n")
  endif()
  foreach(alias IN LISTS aliases)
    string(APPEND project "add_library(${alias} ALIAS ${target})\n")
  endforeach()
  file(WRITE ${WORK}/copies/${folder}/CMakeLists.txt "${project}")
  file(COPY /usr/include/${headers} DESTINATION ${WORK}/copies/${folder}/include)
  execute_process(COMMAND ${CMAKE_COMMAND} -E tar czf ${WORK}/copies/${folder}.tar.gz ${folder}
                  WORKING_DIRECTORY ${WORK}/copies RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "could not make ${folder}.tar.gz")
  endif()
  file(SHA256 ${WORK}/copies/${folder}.tar.gz hash)
  string(TOUPPER ${dep} var)
  list(APPEND defines -DMEMSCOPE_${var}_URL=file://${WORK}/copies/${folder}.tar.gz
       -DMEMSCOPE_${var}_SHA256=${hash})
endforeach()
# Chart.js: the URL moves, the pinned hash stays.
set(chart /usr/share/javascript/chart.js/chart.min.js)
if(NOT EXISTS ${chart})
  message(FATAL_ERROR "${chart} is missing: scripts/bootstrap installs libjs-chart.js")
endif()
list(APPEND defines -DMEMSCOPE_CHART_JS_URL=file://${chart})

set(launcher)
if(CXX_LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${CXX_LAUNCHER})
endif()
execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK}/build -DCMAKE_BUILD_TYPE=Release ${launcher}
          -DFETCHCONTENT_TRY_FIND_PACKAGE_MODE=NEVER -DMEMSCOPE_BUILD_TESTS=OFF
          -DMEMSCOPE_BUILD_BENCH=OFF -DMEMSCOPE_BUILD_EXAMPLES=OFF -DMEMSCOPE_WITH_MPI=OFF
          ${defines}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc)
  message(FATAL_ERROR "configuring with the fallback failed:\n${out}")
endif()
foreach(dep fmt nlohmann_json CLI11)
  if(NOT out MATCHES "memscope: ${dep} not found on this system: built from file://")
    message(FATAL_ERROR "${dep} was not taken from its fallback:\n${out}")
  endif()
endforeach()
if(NOT out MATCHES "Chart.js not found on this system: using file://")
  message(FATAL_ERROR "Chart.js was not taken from its fallback:\n${out}")
endif()
file(SHA256 ${WORK}/build/_deps/chart.js/chart.min.js chart_hash)
file(SHA256 ${chart} debian_hash)
if(NOT chart_hash STREQUAL debian_hash)
  message(FATAL_ERROR "the fetched chart.min.js differs from ${chart}")
endif()

# A wrong hash is refused, naming the file.
execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK}/build-bad-hash
          -DFETCHCONTENT_TRY_FIND_PACKAGE_MODE=NEVER -DMEMSCOPE_BUILD_TESTS=OFF
          -DMEMSCOPE_BUILD_BENCH=OFF -DMEMSCOPE_BUILD_EXAMPLES=OFF -DMEMSCOPE_WITH_MPI=OFF
          ${defines} -DMEMSCOPE_CHART_JS_SHA256=0000000000000000000000000000000000000000000000000000000000000000
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc EQUAL 0 OR NOT out MATCHES "Chart.js: the system has none")
  message(FATAL_ERROR "a wrong Chart.js hash was not refused (exit ${rc}):\n${out}")
endif()

# The command's sources compile against the fetched copies (as system headers).
file(READ ${WORK}/build/compile_commands.json commands)
string(JSON count LENGTH "${commands}")
math(EXPR last "${count} - 1")
set(command)
foreach(i RANGE ${last})
  string(JSON file GET "${commands}" ${i} file)
  if(file MATCHES "tools/memscope/info/cmd_info.cpp$")
    string(JSON command GET "${commands}" ${i} command)
    string(JSON directory GET "${commands}" ${i} directory)
  endif()
endforeach()
if(NOT command)
  message(FATAL_ERROR "tools/memscope/info/cmd_info.cpp is not in compile_commands.json")
endif()
foreach(fetched fmt-src/include nlohmann_json-src/include cli11-src/include)
  if(NOT command MATCHES "-isystem [^ ]*_deps/${fetched}")
    message(FATAL_ERROR "cmd_info.cpp does not use the fetched ${fetched}:\n${command}")
  endif()
endforeach()
# Syntax only, unoptimized: the headers resolve and compile; the object itself is not needed.
string(REPLACE " -O3 " " -O0 " command "${command}")
execute_process(COMMAND sh -c "${command} -fsyntax-only" WORKING_DIRECTORY ${directory}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc)
  message(FATAL_ERROR "cmd_info.cpp did not compile against the fetched copies:\n${out}")
endif()
message(STATUS "fmt, nlohmann_json, CLI11 and Chart.js came from their pinned fallbacks")
