#include "runtime/generator.h"

#include <cstring>
#include <mutex>
#include <vector>

#include <ATen/ops/empty.h>
#include <c10/core/TensorImpl.h>

#include "runtime/device.h"

namespace standin {

namespace {

constexpr size_t kStateBytes = 16;
constexpr size_t kHandedOut = 64;

uint64_t splitmix64(uint64_t value) {
  value += 0x9e3779b97f4a7c15ULL;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ULL;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebULL;
  return value ^ (value >> 31);
}

}  // namespace

NeuronGeneratorImpl::NeuronGeneratorImpl(c10::DeviceIndex index, uint64_t seed)
    : at::CPUGeneratorImpl(seed), seed_(seed) {
  device_ = neuron_device(index);
  key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
}

void NeuronGeneratorImpl::restart(uint64_t seed, uint64_t offset) {
  at::CPUGeneratorImpl::set_current_seed(offset == 0 ? seed : splitmix64(seed ^ splitmix64(offset)));
  seed_ = seed;
  offset_ = offset;
}

void NeuronGeneratorImpl::set_current_seed(uint64_t seed) {
  handed_out_.clear();
  restart(seed, 0);
}

uint64_t NeuronGeneratorImpl::current_seed() const { return seed_; }

uint64_t NeuronGeneratorImpl::seed() {
  uint64_t random = c10::detail::getNonDeterministicRandom();
  set_current_seed(random);
  return random;
}

void NeuronGeneratorImpl::set_offset(uint64_t offset) { restart(seed_, offset); }

uint64_t NeuronGeneratorImpl::get_offset() const { return offset_; }

c10::intrusive_ptr<c10::TensorImpl> NeuronGeneratorImpl::get_state() const {
  handed_out_.emplace_back(offset_, engine_state());
  if (handed_out_.size() > kHandedOut) handed_out_.pop_front();
  at::Tensor state = at::empty({static_cast<int64_t>(kStateBytes)}, at::TensorOptions().dtype(at::kByte));
  std::memcpy(state.data_ptr<uint8_t>(), &seed_, 8);
  std::memcpy(state.data_ptr<uint8_t>() + 8, &offset_, 8);
  return state.getIntrusivePtr();
}

void NeuronGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  at::detail::check_rng_state(new_state);
  TORCH_CHECK(new_state.numel() == static_cast<int64_t>(kStateBytes),
              "RNG state is wrong size: a neuron generator's state is 16 bytes (an 8-byte seed, then an 8-byte "
              "offset), got ", new_state.numel());
  uint64_t seed = 0, offset = 0;
  const auto* bytes = new_state.data_dtype_initialized<uint8_t>();
  std::memcpy(&seed, bytes, 8);
  std::memcpy(&offset, bytes + 8, 8);
  if (seed == seed_) {
    for (auto entry = handed_out_.rbegin(); entry != handed_out_.rend(); ++entry) {
      if (entry->first == offset) {
        at::CPUGeneratorImpl::set_state(*entry->second.unsafeGetTensorImpl());
        offset_ = offset;
        return;
      }
    }
  }
  restart(seed, offset);
}

at::Tensor NeuronGeneratorImpl::engine_state() const {
  return at::Tensor(at::CPUGeneratorImpl::get_state());
}

void NeuronGeneratorImpl::drew(const at::Tensor& engine, uint64_t count) {
  at::CPUGeneratorImpl::set_state(*engine.unsafeGetTensorImpl());
  offset_ += (count + 3) / 4 * 4;
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
