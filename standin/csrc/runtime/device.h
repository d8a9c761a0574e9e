// The NeuronCores of the process: how many there are, and each thread's current one.
#pragma once

#include <c10/core/Device.h>

namespace standin {

constexpr c10::DeviceType kNeuron = c10::DeviceType::PrivateUse1;

// Once, at start: the NeuronCores this process sees, and the current device of every thread until it sets one.
void set_devices(c10::DeviceIndex count, c10::DeviceIndex first);
c10::DeviceIndex device_count();
c10::DeviceIndex current_device();
void check_index(c10::DeviceIndex index);
void set_device(c10::DeviceIndex index);
void set_device_unchecked(c10::DeviceIndex index) noexcept;
// `index`, or the current device where it is -1 (PyTorch's "no index given").
c10::DeviceIndex or_current(c10::DeviceIndex index);
c10::Device neuron_device(c10::DeviceIndex index);

}  // namespace standin
