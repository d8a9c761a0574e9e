#include "runtime/device.h"

#include <c10/util/Exception.h>

namespace standin {

namespace {
c10::DeviceIndex count = 1;
c10::DeviceIndex first_index = 0;
thread_local c10::DeviceIndex current_index = first_index;  // (read when a thread first asks)
}  // namespace

void set_devices(c10::DeviceIndex total, c10::DeviceIndex first) {
  count = total;
  first_index = first;
  current_index = first;
}

c10::DeviceIndex device_count() { return count; }

c10::DeviceIndex current_device() { return current_index; }

void check_index(c10::DeviceIndex index) {
  TORCH_CHECK(index >= 0 && index < count, "Invalid device id: ", static_cast<int>(index),
              ". Valid range is 0 to ", count - 1, " (neuron stand-in)");
}

void set_device(c10::DeviceIndex index) {
  check_index(index);
  current_index = index;
}

void set_device_unchecked(c10::DeviceIndex index) noexcept { current_index = index; }

c10::DeviceIndex or_current(c10::DeviceIndex index) { return index == -1 ? current_index : index; }

c10::Device neuron_device(c10::DeviceIndex index) { return c10::Device(kNeuron, index); }

}  // namespace standin
