# How memscope's own targets use fmt: the interface target memscope_fmt.
#
# Header-only fmt (FMT_HEADER_ONLY) compiles fmt's whole formatting engine in every unit that
# formats: about 3.5 s of CPU each at -O3 (GCC 12), in about a hundred units of the library,
# the command and the extension. With fmt 9 (Debian 12's and the pinned fallback's), the units
# see declarations only and src/common/fmt_compiled.cpp compiles the engine once into the
# library, which so still carries everything it needs: its users need no fmt. Any other fmt
# version keeps the header-only mode (slower to build, same program).
# Needs: fmt::fmt-header-only (cmake/Dependencies.cmake), fmt_fetched (its source folder when
# fetched, else empty). Sets MEMSCOPE_FMT_COMPILED.
if(fmt_fetched)
  set(memscope_fmt_core_h ${fmt_fetched}/include/fmt/core.h)
else()
  get_target_property(memscope_fmt_dirs fmt::fmt-header-only INTERFACE_INCLUDE_DIRECTORIES)
  find_file(memscope_fmt_core_h fmt/core.h PATHS ${memscope_fmt_dirs} NO_DEFAULT_PATH NO_CACHE)
endif()
set(memscope_fmt_version 0)
if(memscope_fmt_core_h AND EXISTS ${memscope_fmt_core_h})
  file(STRINGS ${memscope_fmt_core_h} memscope_fmt_version_line REGEX "^#define FMT_VERSION [0-9]+")
  string(REGEX MATCH "[0-9]+$" memscope_fmt_version "${memscope_fmt_version_line}")
endif()
math(EXPR memscope_fmt_major "${memscope_fmt_version} / 10000")

option(MEMSCOPE_FMT_HEADER_ONLY "Use fmt header-only even where its engine can be compiled once" OFF)
add_library(memscope_fmt INTERFACE)
if(memscope_fmt_major EQUAL 9 AND NOT MEMSCOPE_FMT_HEADER_ONLY)
  set(MEMSCOPE_FMT_COMPILED ON)
  get_target_property(memscope_fmt_dirs fmt::fmt-header-only INTERFACE_INCLUDE_DIRECTORIES)
  target_include_directories(memscope_fmt SYSTEM INTERFACE ${memscope_fmt_dirs})
  message(STATUS "memscope: fmt ${memscope_fmt_version}: its engine compiled once into the library")
else()
  set(MEMSCOPE_FMT_COMPILED OFF)
  target_link_libraries(memscope_fmt INTERFACE fmt::fmt-header-only)
  message(STATUS "memscope: fmt ${memscope_fmt_version}: header-only")
endif()
