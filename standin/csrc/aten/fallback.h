// The boxed fallback: an op on device tensors without a kernel of the device runs its CPU kernel on their memory.
#pragma once

#include <c10/core/Device.h>

#include <string>

namespace standin {

// Refuses an op given a CPU tensor beside device tensors, as a device does.
[[noreturn]] void mixed_devices(const std::string& op_name, c10::DeviceIndex index);

}  // namespace standin
