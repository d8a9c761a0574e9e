// Random numbers: each NeuronCore's generators, apart from the CPU's. A generator of the device draws from the
// CPU's Mersenne Twister with the device as its device (as PyTorch's openreg example makes one), so
// `torch.Generator(device="neuron").device` is `neuron:N` and a random op on the device draws from it.
//
// Its state is what TorchNeuron's is (its random number generation reference): 16 bytes, an 8-byte seed then an
// 8-byte offset, which DTensor's RNG tracker reads and moves to give each shard its own numbers. Each random op
// moves the offset past the values it drew (rounded up to 4, as a Philox counter). A state this generator handed
// out restores the engine exactly (a saved state replays the same numbers); any other offset restarts the engine
// from the seed and the offset mixed (offset 0: the seed itself, as manual_seed leaves it).
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <deque>
#include <utility>

namespace standin {

struct NeuronGeneratorImpl final : at::CPUGeneratorImpl {
  NeuronGeneratorImpl(c10::DeviceIndex index, uint64_t seed);

  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  void set_state(const c10::TensorImpl& new_state) override;

  // The Mersenne Twister's own state, for a CPU kernel to draw from; `drew` takes it back after `count` values.
  at::Tensor engine_state() const;
  void drew(const at::Tensor& engine, uint64_t count);

 private:
  void restart(uint64_t seed, uint64_t offset);
  uint64_t seed_;
  uint64_t offset_ = 0;
  // The engine at the offsets of the states handed out (the latest few): restoring one of them replays exactly.
  mutable std::deque<std::pair<uint64_t, at::Tensor>> handed_out_;
};

// The default generator of `neuron:index` (-1: the current device).
const at::Generator& default_generator(c10::DeviceIndex index);
// A new generator of `neuron:index` (-1: the current device), as `torch.Generator(device=...)` makes one.
at::Generator new_generator(c10::DeviceIndex index);
bool is_device_generator(const at::Generator& generator);

// A CPU kernel draws from a CPU generator only: `run` (which returns how many values the op drew) runs with
// `cpu` holding the engine of `device`, which then takes the engine `cpu` advanced to; `cpu` gets its own state
// back.
template <typename Run>
void drawing_from(const at::Generator& device, at::Generator cpu, Run run) {
  auto* generator = device.get<NeuronGeneratorImpl>();
  at::Tensor own = cpu.get_state();
  cpu.set_state(generator->engine_state());
  uint64_t count = 0;
  try {
    count = run();
  } catch (...) {
    cpu.set_state(own);
    throw;
  }
  generator->drew(cpu.get_state(), count);
  cpu.set_state(own);
}

}  // namespace standin
