#include "runtime/generator.h"

#include <mutex>
#include <vector>

#include "runtime/device.h"

namespace standin {

NeuronGeneratorImpl::NeuronGeneratorImpl(c10::DeviceIndex index, uint64_t seed) : at::CPUGeneratorImpl(seed) {
  device_ = neuron_device(index);
  key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
}

namespace {
std::mutex generators_mutex;
std::vector<at::Generator> generators;
}  // namespace

const at::Generator& default_generator(c10::DeviceIndex index) {
  index = or_current(index);
  check_index(index);
  std::lock_guard<std::mutex> lock(generators_mutex);
  if (generators.empty()) {
    // Seeded as the CPU's default generator is at that moment (torch.manual_seed seeds both afterwards).
    uint64_t seed = at::detail::getDefaultCPUGenerator().current_seed();
    for (c10::DeviceIndex i = 0; i < device_count(); ++i) {
      generators.push_back(at::make_generator<NeuronGeneratorImpl>(i, seed));
    }
  }
  return generators[index];
}

at::Generator new_generator(c10::DeviceIndex index) {
  index = or_current(index);
  check_index(index);
  return at::make_generator<NeuronGeneratorImpl>(index, c10::default_rng_seed_val);
}

bool is_device_generator(const at::Generator& generator) {
  return generator.defined() && generator.device().type() == c10::DeviceType::PrivateUse1;
}

}  // namespace standin
