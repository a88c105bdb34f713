// The cross-rank table and its wire format (rank_table.hpp, rank_payload.hpp) for
// memscope.distributed, whose transports (torch.distributed, mpi4py) move the bytes: the same
// reduce, layout and payload as memscope::mpi, so Python and C++ ranks gather together.
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "errors.hpp"
#include "memscope/errors.hpp"
#include "memscope/rank_payload.hpp"
#include "memscope/rank_table.hpp"

namespace memscope::python {

namespace {

// A dict of str -> int or float (memscope.distributed's _check has already turned numpy
// scalars and the like into these). An int beyond int64 becomes the int64 limit, which
// check_rank_metrics refuses as beyond 2^53, naming the key.
RankMetrics rank_metrics(const nb::dict& metrics) {
  RankMetrics out;
  for (const auto& [key, value] : metrics) {
    std::string name = text_arg(key, "metric key");
    if (PyLong_Check(value.ptr())) {
      int overflow = 0;
      const long long i = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
      if (overflow != 0) {
        out.emplace(std::move(name), overflow > 0 ? std::numeric_limits<std::int64_t>::max()
                                                  : std::numeric_limits<std::int64_t>::min());
      } else {
        out.emplace(std::move(name), std::int64_t{i});
      }
    } else if (PyFloat_Check(value.ptr())) {
      out.emplace(std::move(name), PyFloat_AS_DOUBLE(value.ptr()));
    } else {
      raise(PyExc_TypeError, "metric '" + name + "' must be an int or a float, not " +
                                 nb::type_name(value.type()).c_str());
    }
  }
  return out;
}

// Bad metric values are the caller's input: ValueError, as Python code expects for a NaN.
RankMetrics checked(const nb::dict& metrics, const std::string& caller) {
  RankMetrics out = rank_metrics(metrics);
  try {
    check_rank_metrics(out, caller);
  } catch (const UsageError& e) {
    raise(PyExc_ValueError, e.what());
  }
  return out;
}

nb::dict to_dict(const RankMetrics& metrics) {
  nb::dict out;
  for (const auto& [key, value] : metrics) {
    if (const auto* i = std::get_if<std::int64_t>(&value)) {
      out[key.c_str()] = nb::int_(*i);
    } else {
      out[key.c_str()] = nb::float_(std::get<double>(value));
    }
  }
  return out;
}

}  // namespace

void bind_rank_table(nb::module_& m) {
  nb::class_<Reduction>(m, "RankReduction", "One key over the ranks that reported it.")
      .def_ro("min", &Reduction::min)
      .def_ro("max", &Reduction::max)
      .def_ro("mean", &Reduction::mean)
      .def_ro("sum", &Reduction::sum)
      .def_ro("argmax", &Reduction::argmax, "The lowest rank holding max.")
      .def_ro("count", &Reduction::count, "Ranks that reported the key.")
      .def_ro("missing", &Reduction::missing, "Ranks that did not, ascending.");
  nb::class_<RankTable>(m, "ReducedRanks", "Every rank's metrics reduced per key (as floats).")
      .def_ro("world_size", &RankTable::world_size)
      .def_ro("reductions", &RankTable::reductions)
      .def("format", &RankTable::format, "The aligned text table.")
      .def("to_json", &RankTable::to_json);
  m.def("reduce_ranks", &reduce, nb::arg("ranks"),
        "ranks[r]: rank r's metrics -> the table (missing keys are never 0).");

  m.def(
      "rank_check",
      [](const nb::dict& metrics, const std::string& caller) { (void)checked(metrics, caller); },
      nb::arg("metrics"), nb::arg("caller"),
      "ValueError naming the key for a NaN, an int beyond 2**53 or a key with a NUL.");
  m.def(
      "rank_key_blob",
      [](const nb::dict& metrics) {
        const std::string blob = key_blob(rank_metrics(metrics));
        return nb::bytes(blob.data(), blob.size());
      },
      nb::arg("metrics"), "This rank's keys for the key table: each followed by a NUL byte.");
  m.def(
      "rank_agree_table",
      [](const std::vector<std::string>& table, const nb::bytes& blobs) {
        return agree_table(table, {blobs.c_str(), blobs.size()});
      },
      nb::arg("table"), nb::arg("blobs"),
      "The grown table: `table` united with every key in the ranks' blobs, sorted.");
  m.def(
      "rank_encode",
      [](const std::vector<std::string>& table, const nb::dict& metrics,
         const std::string& caller) {
        return encode_payload(table, checked(metrics, caller), caller);
      },
      nb::arg("table"), nb::arg("metrics"), nb::arg("caller"),
      "This rank's payload row: [fits, value per key (NaN = missing), int flags].");
  m.def(
      "rank_payload_fits",
      [](const std::vector<double>& rows, std::size_t keys) { return payload_fits(rows, keys); },
      nb::arg("rows"), nb::arg("keys"), "True when every rank's keys were in the table.");
  m.def(
      "rank_decode",
      [](const std::vector<double>& rows, const std::vector<std::string>& table) {
        nb::list out;
        for (const auto& rank : decode_payload(rows, table)) out.append(to_dict(rank));
        return out;
      },
      nb::arg("rows"), nb::arg("table"),
      "Every rank's metrics from the rows (concatenated, rank order), ints as ints.");
}

}  // namespace memscope::python
