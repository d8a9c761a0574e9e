// What the stand-in's Python (standin/device.py) calls. Loading the library registers the device guard, the
// kernels and the fallback; start() registers the allocator and the hooks once the device has its name.

#include <c10/core/Allocator.h>
#include <torch/csrc/utils/pybind.h>

#include "aten/host_view.h"
#include "aten/op_records.h"
#include "runtime/allocator.h"
#include "runtime/device.h"
#include "runtime/generator.h"
#include "runtime/hooks.h"

namespace {

using standin::check_index;

void start(int devices, int first, py::object lookup, py::object record, py::object dtypes) {
  standin::set_devices(static_cast<c10::DeviceIndex>(devices), static_cast<c10::DeviceIndex>(first));
  standin::set_rule_callbacks(std::move(lookup), std::move(record), std::move(dtypes));
  c10::SetAllocator(standin::kNeuron, standin::device_allocator());
  standin::register_hooks();
}

py::dict memory_stats(int index) {
  check_index(static_cast<c10::DeviceIndex>(index));
  standin::MemoryStats stats = standin::memory_stats(static_cast<c10::DeviceIndex>(index));
  py::dict result;
  result["current"] = stats.current;
  result["peak"] = stats.peak;
  return result;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("start", &start, "the device count, the first current device, the rule callbacks; registers the allocator and hooks");
  m.def("host", &standin::as_host, "a device tensor as a CPU tensor on the same memory");
  m.def("device_tensor", [](const at::Tensor& host, int index) {
    check_index(static_cast<c10::DeviceIndex>(index));
    return standin::to_device(host, static_cast<c10::DeviceIndex>(index));
  }, "a CPU tensor as a device tensor on the same memory");
  m.def("device_count", [] { return static_cast<int>(standin::device_count()); });
  m.def("check_index", [](int index) { check_index(static_cast<c10::DeviceIndex>(index)); });
  m.def("current_device", [] { return static_cast<int>(standin::current_device()); });
  m.def("set_device", [](int index) { standin::set_device(static_cast<c10::DeviceIndex>(index)); });
  m.def("default_generator", [](int index) { return standin::default_generator(static_cast<c10::DeviceIndex>(index)); });
  m.def("memory_stats", &memory_stats);
  m.def("reset_peak", [](int index) {
    check_index(static_cast<c10::DeviceIndex>(index));
    standin::reset_peak(static_cast<c10::DeviceIndex>(index));
  });
  m.def("executed_ops", &standin::executed_ops);
  m.def("clear_executed_ops", &standin::clear_executed_ops);
}
