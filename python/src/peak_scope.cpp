// memscope.PeakValues and memscope.PeakScope: the peak windows of an allocator
// (Allocator.peak_scope() opens one).
#include <fmt/format.h>
#include <nanobind/stl/string.h>

#include <array>
#include <string>

#include "bindings.hpp"
#include "handles.hpp"

namespace memscope::python {
namespace {

// The counters of PeakValues, as attributes, as_dict() keys and in repr().
struct PeakField {
  const char* name;
  std::int64_t PeakValues::*member;
};
constexpr std::array<PeakField, 4> kPeakFields{{
    {"allocated_bytes", &PeakValues::allocated_bytes},
    {"reserved_bytes", &PeakValues::reserved_bytes},
    {"active_bytes", &PeakValues::active_bytes},
    {"requested_bytes", &PeakValues::requested_bytes},
}};
static_assert(sizeof(PeakValues) == kPeakFields.size() * sizeof(std::int64_t),
              "PeakValues has a member kPeakFields lacks");

}  // namespace

void bind_peak_scope(nb::module_& m) {
  auto peak_values =
      nb::class_<PeakValues>(m, "PeakValues", "Peak byte counters of a peak scope.")
          .def("as_dict",
               [](const PeakValues& v) {
                 nb::dict d;
                 for (const PeakField& field : kPeakFields) d[field.name] = v.*field.member;
                 return d;
               })
          .def("__eq__", [](const PeakValues& a, const PeakValues& b) { return a == b; })
          .def("__repr__", [](const PeakValues& v) {
            std::string fields;
            for (const PeakField& field : kPeakFields) {
              if (!fields.empty()) fields += ", ";
              fields += fmt::format("{}={}", field.name, v.*field.member);
            }
            return "PeakValues(" + fields + ")";
          });
  for (const PeakField& field : kPeakFields) peak_values.def_ro(field.name, field.member);

  nb::class_<PyPeakScope>(m, "PeakScope",
                          "An independent peak window: `peak` is the highest value of each "
                          "counter since the scope opened. Nestable, closable in any order, "
                          "untouched by reset_peak_memory_stats().")
      .def_prop_ro("peak", [](const PyPeakScope& s) { return s.scope.peak(); })
      .def_prop_ro("begin", [](const PyPeakScope& s) { return s.scope.begin(); })
      .def_prop_ro("is_open", [](const PyPeakScope& s) { return s.scope.is_open(); })
      .def(
          "close", [](PyPeakScope& s) { s.scope.close(); }, "Closes now; `peak` keeps its value.")
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](PyPeakScope& s, const nb::args&) { s.scope.close(); });
}

}  // namespace memscope::python
