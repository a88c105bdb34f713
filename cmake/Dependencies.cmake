# Third-party dependencies: the system's where it has them (Debian's libfmt-dev,
# nlohmann-json3-dev, libcli11-dev and libjs-chart.js; conda's; anything on CMAKE_PREFIX_PATH),
# else a pinned upstream release fetched at configure time and checked against its SHA256, the
# convention RMM and others follow. So `pip install .` works on RHEL, in conda, in a bare
# manylinux container, and Debian's packages stay the default where they are installed.
#
# FetchContent tries find_package() first (FIND_PACKAGE_ARGS) and downloads only when that
# fails; -DFETCHCONTENT_TRY_FIND_PACKAGE_MODE=NEVER always downloads (also instead of Debian's
# Chart.js). Every URL and hash is a cache variable (MEMSCOPE_<NAME>_URL, MEMSCOPE_<NAME>_SHA256),
# so a site behind a mirror, or without a network (a file:// copy), points them elsewhere:
# tests/deps does, at copies made from Debian's sources.
#
# Where each hash comes from (docs/install.md): nlohmann_json's was computed here from Debian's
# orig tarball, which is GitHub's v3.11.2 archive unchanged; Chart.js's is that of Debian's
# chart.min.js, byte-identical to dist/chart.min.js of the npm release 3.9.1. fmt's and CLI11's
# are the hashes other projects pin for the same URLs: Debian repacks both (+ds), so they could
# not be computed here.
include(FetchContent)

set(MEMSCOPE_FMT_URL "https://github.com/fmtlib/fmt/releases/download/9.1.0/fmt-9.1.0.zip"
    CACHE STRING "fmt release to build with when the system has none")
set(MEMSCOPE_FMT_SHA256 "cceb4cb9366e18a5742128cb3524ce5f50e88b476f1e54737a47ffdf4df4c996"
    CACHE STRING "SHA256 of MEMSCOPE_FMT_URL")
set(MEMSCOPE_JSON_URL "https://github.com/nlohmann/json/archive/refs/tags/v3.11.2.tar.gz"
    CACHE STRING "nlohmann_json release to build with when the system has none")
set(MEMSCOPE_JSON_SHA256 "d69f9deb6a75e2580465c6c4c5111b89c4dc2fa94e3a85fcd2ffcd9a143d9273"
    CACHE STRING "SHA256 of MEMSCOPE_JSON_URL")
set(MEMSCOPE_CLI11_URL "https://github.com/CLIUtils/CLI11/archive/refs/tags/v2.1.2.tar.gz"
    CACHE STRING "CLI11 release to build with when the system has none")
set(MEMSCOPE_CLI11_SHA256 "26291377e892ba0e5b4972cdfd4a2ab3bf53af8dac1f4ea8fe0d1376b625c8cb"
    CACHE STRING "SHA256 of MEMSCOPE_CLI11_URL")
set(MEMSCOPE_CHART_JS_URL "https://cdn.jsdelivr.net/npm/chart.js@3.9.1/dist/chart.min.js"
    CACHE STRING "Chart.js (dist/chart.min.js of the npm release) when the system has none")
set(MEMSCOPE_CHART_JS_SHA256 "fbc45926e6b46845a0f905552a0e0b1331049bff1115ecf94dbe0904d895e710"
    CACHE STRING "SHA256 of MEMSCOPE_CHART_JS_URL")

# The fetched projects' own tests, docs and install rules stay off (their option() calls honour
# these variables: policy CMP0077), and they are linked as build-time, header-only parts.
set(CMAKE_POLICY_DEFAULT_CMP0077 NEW)
set(FMT_INSTALL OFF)
set(FMT_TEST OFF)
set(FMT_DOC OFF)
set(JSON_BuildTests OFF)
set(JSON_Install OFF)
set(CLI11_BUILD_TESTS OFF)
set(CLI11_BUILD_EXAMPLES OFF)
set(CLI11_BUILD_DOCS OFF)
set(CLI11_INSTALL OFF)

FetchContent_Declare(fmt URL ${MEMSCOPE_FMT_URL} URL_HASH SHA256=${MEMSCOPE_FMT_SHA256}
                     FIND_PACKAGE_ARGS)
FetchContent_Declare(nlohmann_json URL ${MEMSCOPE_JSON_URL}
                     URL_HASH SHA256=${MEMSCOPE_JSON_SHA256} FIND_PACKAGE_ARGS 3.10)
set(memscope_fetched fmt nlohmann_json)
set(memscope_fetched_vars FMT JSON)
if(MEMSCOPE_BUILD_TOOLS)
  FetchContent_Declare(CLI11 URL ${MEMSCOPE_CLI11_URL} URL_HASH SHA256=${MEMSCOPE_CLI11_SHA256}
                       FIND_PACKAGE_ARGS CONFIG)
  list(APPEND memscope_fetched CLI11)
  list(APPEND memscope_fetched_vars CLI11)
endif()
FetchContent_MakeAvailable(${memscope_fetched})
# A dependency find_package() satisfied counts as populated too, but has no source folder.
foreach(dep var IN ZIP_LISTS memscope_fetched memscope_fetched_vars)
  FetchContent_GetProperties(${dep} SOURCE_DIR fetched)
  if(fetched)
    message(STATUS "memscope: ${dep} not found on this system: built from ${MEMSCOPE_${var}_URL}")
  else()
    message(STATUS "memscope: ${dep} ${${dep}_VERSION} from this system")
  endif()
endforeach()
# Fetched headers are third-party code: SYSTEM, so -Wconversion -Werror on our sources does not
# fire inside them (as for imported targets). Our targets use fmt through memscope_fmt
# (cmake/FmtMode.cmake), never fmt's own compiled library, so a pip install does not build it.
foreach(target fmt fmt-header-only nlohmann_json CLI11)
  if(TARGET ${target})
    get_target_property(imported ${target} IMPORTED)
    if(NOT imported)
      set_target_properties(${target} PROPERTIES SYSTEM ON)
    endif()
  endif()
endforeach()
FetchContent_GetProperties(fmt SOURCE_DIR fmt_fetched)
if(fmt_fetched AND TARGET fmt)
  set_target_properties(fmt PROPERTIES EXCLUDE_FROM_ALL ON)
endif()
include(${CMAKE_CURRENT_LIST_DIR}/FmtMode.cmake)

# Chart.js, compiled into the library's HTML reports (src/report/) so they open with no network:
# Debian's libjs-chart.js, else the pinned release file, downloaded into the build folder.
if(NOT MEMSCOPE_CHART_JS)
  if(NOT FETCHCONTENT_TRY_FIND_PACKAGE_MODE STREQUAL "NEVER")
    find_file(MEMSCOPE_CHART_JS_SYSTEM chart.min.js PATHS /usr/share/javascript/chart.js
              NO_DEFAULT_PATH)
  endif()
  if(MEMSCOPE_CHART_JS_SYSTEM)
    set(MEMSCOPE_CHART_JS ${MEMSCOPE_CHART_JS_SYSTEM})
    message(STATUS "memscope: Chart.js from this system (${MEMSCOPE_CHART_JS})")
  else()
    set(chart_js ${CMAKE_BINARY_DIR}/_deps/chart.js/chart.min.js)
    if(NOT EXISTS ${chart_js})
      file(DOWNLOAD ${MEMSCOPE_CHART_JS_URL} ${chart_js}.part
           EXPECTED_HASH SHA256=${MEMSCOPE_CHART_JS_SHA256} STATUS status)
      list(GET status 0 code)
      if(NOT code EQUAL 0)
        file(REMOVE ${chart_js}.part)
        list(GET status 1 why)
        message(FATAL_ERROR
                "Chart.js: the system has none (Debian's libjs-chart.js) and downloading "
                "${MEMSCOPE_CHART_JS_URL} failed (${why}). Install libjs-chart.js, set "
                "MEMSCOPE_CHART_JS to a chart.min.js 3.x, or MEMSCOPE_CHART_JS_URL (and "
                "MEMSCOPE_CHART_JS_SHA256) to a copy you can reach.")
      endif()
      file(RENAME ${chart_js}.part ${chart_js})
    endif()
    set(MEMSCOPE_CHART_JS ${chart_js})
    message(STATUS "memscope: Chart.js not found on this system: using ${MEMSCOPE_CHART_JS_URL}")
  endif()
endif()
