// The boxed fallback: an op on device tensors without a kernel of the device runs its CPU kernel on their memory.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <string>

namespace standin {

// Refuses an op given a CPU tensor beside device tensors, as a device does.
[[noreturn]] void mixed_devices(const std::string& op_name, c10::DeviceIndex index);

// bfloat16 and float16: a matrix product or a convolution of such operands accumulates in float32 and rounds once,
// as a NeuronCore's matrix engine does (the matrix products in the fallback, convolutions in kernels.cpp).
inline bool reduced_precision(c10::ScalarType type) { return type == c10::kBFloat16 || type == c10::kHalf; }

}  // namespace standin
