// Metrics as Python passes them: a dict of str keys and int, float or str values (the metrics
// functions, metrics.cpp, and memscope.Tracker's, tracker.cpp).
#pragma once

#include <nanobind/nanobind.h>

#include "memscope/metrics.hpp"

namespace memscope::python {

namespace nb = nanobind;

// A dict as Metrics: an int (or anything with __index__; bool as 0/1), a float (or anything with
// __float__) or a str each. An int outside int64 is a ValueError, any other type a TypeError,
// both naming the key and the value.
[[nodiscard]] Metrics to_metrics(const nb::dict& values);
// Metrics as a dict of int, float and str.
[[nodiscard]] nb::dict to_dict(const Metrics& metrics);

}  // namespace memscope::python
