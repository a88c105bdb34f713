// Device memory as the driver sees it (device_probe.hpp): NVML, with cuMemGetInfo as fallback.
#include "memscope/device_probe.hpp"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include "bindings.hpp"
#include "sources.hpp"

namespace memscope::python {
namespace {

nb::dict device_memory_dict(const DeviceMemoryInfo& info) {
  nb::dict d;
  d["total"] = info.total;
  d["free"] = info.free;
  d["used"] = info.used;
  d["reserved"] = info.reserved;
  d["source"] = info.source;
  return d;
}

}  // namespace

void bind_device_probe(nb::module_& m) {
  m.def("_nvml_available", [] {
    const Availability a = NvmlProbe::available();
    return std::pair{a.available, a.reason};
  });
  m.def(
      "_device_memory_info",
      [](int cuda_device) {
        DeviceMemoryInfo info;
        {
          nb::gil_scoped_release unlocked;
          info = device_memory_info(cuda_device);
        }
        return device_memory_dict(info);
      },
      nb::arg("cuda_device") = 0,
      "{total, free, used, reserved, source} of a CUDA device, from NVML or cuMemGetInfo.");

  nb::class_<NvmlProbe>(m, "NvmlProbe", "Device memory and GPU processes through NVML.")
      .def(nb::init<>())
      .def_prop_ro("device_count", &NvmlProbe::device_count)
      .def_prop_ro("driver_version", &NvmlProbe::driver_version)
      .def(
          "device",
          [](const NvmlProbe& p, unsigned index) {
            const GpuDevice d = p.device(index);
            nb::dict out;
            out["nvml_index"] = d.nvml_index;
            out["name"] = d.name;
            out["uuid"] = d.uuid;
            return out;
          },
          nb::arg("nvml_index"))
      .def(
          "memory",
          [](const NvmlProbe& p, unsigned index) { return device_memory_dict(p.memory(index)); },
          nb::arg("nvml_index"))
      .def(
          "processes",
          [](const NvmlProbe& p, unsigned index) {
            nb::list out;
            for (const GpuProcess& proc : p.processes(index)) {
              nb::dict d;
              d["pid"] = proc.pid;
              d["used_bytes"] =
                  proc.used_bytes ? nb::object(nb::int_(*proc.used_bytes)) : nb::none();
              out.append(d);
            }
            return out;
          },
          nb::arg("nvml_index"))
      .def("own_process_memory", &NvmlProbe::own_process_memory, nb::arg("nvml_index"))
      .def("nvml_index_of", &NvmlProbe::nvml_index_of, nb::arg("cuda_index"));

  m.def(
      "_nvml_source",
      [](int cuda_device, bool device_wide, double sampling_interval) {
        NvmlSourceOptions options;
        options.cuda_device = cuda_device;
        options.device_wide = device_wide;
        options.sampling_interval = interval_from_seconds(sampling_interval);
        return PySourceHandle{make_nvml_source(options)};
      },
      nb::arg("cuda_device") = 0, nb::arg("device_wide") = false,
      nb::arg("sampling_interval") = 0.01);
}

}  // namespace memscope::python
