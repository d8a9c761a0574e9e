// Random numbers: each NeuronCore's generators, apart from the CPU's. A generator of the device is the CPU's
// Mersenne Twister with the device as its device (as PyTorch's openreg example makes one), so
// `torch.Generator(device="neuron").device` is `neuron:N` and a random op on the device draws from it.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

namespace standin {

struct NeuronGeneratorImpl final : at::CPUGeneratorImpl {
  NeuronGeneratorImpl(c10::DeviceIndex index, uint64_t seed);
};

// The default generator of `neuron:index` (-1: the current device).
const at::Generator& default_generator(c10::DeviceIndex index);
// A new generator of `neuron:index` (-1: the current device), as `torch.Generator(device=...)` makes one.
at::Generator new_generator(c10::DeviceIndex index);
bool is_device_generator(const at::Generator& generator);

// A CPU kernel draws from a CPU generator only: `run` runs with `cpu` holding the state of `device`, which then
// takes the state `cpu` advanced to; `cpu` gets its own state back.
template <typename Run>
void drawing_from(const at::Generator& device, at::Generator cpu, Run run) {
  at::Tensor own = cpu.get_state();
  cpu.set_state(device.get_state());
  try {
    run();
  } catch (...) {
    cpu.set_state(own);
    throw;
  }
  const_cast<at::Generator&>(device).set_state(cpu.get_state());
  cpu.set_state(own);
}

}  // namespace standin
