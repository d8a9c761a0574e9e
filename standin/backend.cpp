// The stand-in's `neuron` device as a C++ PrivateUse1 backend whose memory is host memory.
//
// Every storage on `neuron:N` is an allocation of the CPU allocator, held by a CPU storage that its device
// storage keeps alive (`Block`). An op on device tensors reaches the PrivateUse1 kernels registered here, or
// the boxed fallback: it views each device tensor as a CPU tensor on the same memory, runs the op's CPU
// kernel, and gives back the device tensors it wrote to or a device tensor on the memory of each new result.
// No data is copied; the cost per op is a few tensor headers. Python (standin) registers the
// device's name, `torch.neuron`, the attention kernels and the rest.

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/EmptyTensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/Resize.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice_ops.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/library.h>

#include <mutex>
#include <utility>
#include <unordered_map>
#include <unordered_set>

namespace {

constexpr c10::DeviceType kNeuron = c10::DeviceType::PrivateUse1;

c10::DeviceIndex first_index = 0;  // every thread's current device until it sets one (start() sets it)
thread_local c10::DeviceIndex current_index = first_index;
c10::DeviceIndex device_total = 1;

c10::Device neuron_device(c10::DeviceIndex index) { return c10::Device(kNeuron, index); }

void check_index(c10::DeviceIndex index) {
  TORCH_CHECK(index >= 0 && index < device_total, "Invalid device id: ", static_cast<int>(index),
              ". Valid range is 0 to ", device_total - 1, " (neuron stand-in)");
}

void set_current(c10::DeviceIndex index) {
  check_index(index);
  current_index = index;
}

// --- memory: per-device byte counts of live device storages ---------------------------------------------

struct MemoryStats {
  int64_t current = 0;
  int64_t peak = 0;
};
std::mutex stats_mutex;
std::unordered_map<int, MemoryStats> stats;

void count_bytes(c10::DeviceIndex index, int64_t bytes) {
  std::lock_guard<std::mutex> lock(stats_mutex);
  MemoryStats& entry = stats[index];
  entry.current += bytes;
  entry.peak = std::max(entry.peak, entry.current);
}

// What a device storage's DataPtr holds: the CPU storage that owns the memory.
struct Block {
  c10::Storage host;
  int64_t nbytes;
  c10::DeviceIndex index;
};

void release_block(void* pointer) {
  auto* block = static_cast<Block*>(pointer);
  count_bytes(block->index, -block->nbytes);
  delete block;
}

c10::DataPtr device_data(c10::Storage host, c10::DeviceIndex index) {
  void* data = host.mutable_data();  // materializes a copy-on-write storage before its memory is shared
  int64_t nbytes = static_cast<int64_t>(host.nbytes());
  count_bytes(index, nbytes);
  return c10::DataPtr(data, new Block{std::move(host), nbytes, index}, &release_block, neuron_device(index));
}

Block* block_of(const c10::Storage& storage) {
  auto* block = storage.data_ptr().cast_context<Block>(&release_block);
  TORCH_CHECK(block != nullptr, "neuron stand-in: a device storage that the stand-in did not allocate");
  return block;
}

struct NeuronAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    c10::Allocator* cpu = c10::GetCPUAllocator();
    c10::Storage host(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), nbytes,
                                                            cpu->allocate(nbytes), cpu, /*resizable=*/false));
    return device_data(std::move(host), current_index);
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};
NeuronAllocator allocator;

// Pinned host memory is ordinary host memory here; the pointers are remembered so `is_pinned()` holds.
std::mutex pinned_mutex;
std::unordered_set<void*> pinned;

void release_pinned(void* pointer) {
  {
    std::lock_guard<std::mutex> lock(pinned_mutex);
    pinned.erase(pointer);
  }
  c10::GetCPUAllocator()->raw_deleter()(pointer);
}

struct PinnedAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    void* data = c10::GetCPUAllocator()->raw_allocate(nbytes);
    std::lock_guard<std::mutex> lock(pinned_mutex);
    pinned.insert(data);
    return c10::DataPtr(data, data, &release_pinned, c10::Device(c10::DeviceType::CPU));
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release_pinned; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};
PinnedAllocator pinned_allocator;

// --- tensors: a device tensor seen as a CPU tensor on the same memory, and back ---------------------------

at::Tensor with_layout_of(c10::Storage storage, c10::DispatchKey key, const at::Tensor& like) {
  auto impl = c10::make_intrusive<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(key), like.dtype());
  impl->set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  impl->_set_conj(like.is_conj());
  impl->_set_neg(like.is_neg());
  return at::Tensor(std::move(impl));
}

at::Tensor host_view(const at::Tensor& tensor) {
  return with_layout_of(block_of(tensor.storage())->host, c10::DispatchKey::CPU, tensor);
}

void release_borrowed(void* pointer) { delete static_cast<c10::Storage*>(pointer); }

// A tensor an op writes to may be resized by the CPU kernel (an `out=` made with `empty({0})`): its CPU view
// gets a resizable storage of its own on the same memory, so a resize reallocates that one, never the memory
// the device storage holds; the device tensor then takes the new memory (as a device's resize does).
at::Tensor host_view_to_write(const at::Tensor& tensor) {
  const c10::Storage& host = block_of(tensor.storage())->host;
  c10::DataPtr borrowed(host.mutable_data(), new c10::Storage(host), &release_borrowed,
                        c10::Device(c10::DeviceType::CPU));
  c10::Storage storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), host.nbytes(),
                                                             std::move(borrowed), c10::GetCPUAllocator(),
                                                             /*resizable=*/true));
  return with_layout_of(std::move(storage), c10::DispatchKey::CPU, tensor);
}

bool on_device(const at::Tensor& tensor) { return tensor.defined() && tensor.device().type() == kNeuron; }

// One op's device storages, by the CPU storage that holds their memory: a result on one of them (a view, an
// in-place result) lands on it, and results that share new memory share one new device storage.
struct StorageMap {
  std::vector<std::pair<const c10::StorageImpl*, c10::Storage>> entries;

  c10::Storage device_storage(const c10::Storage& host, c10::DeviceIndex index) {
    for (auto& [key, storage] : entries) {
      if (key == host.unsafeGetStorageImpl()) return storage;
    }
    c10::Storage storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(),
                                                               host.nbytes(), device_data(host, index),
                                                               &allocator, /*resizable=*/true));
    entries.emplace_back(host.unsafeGetStorageImpl(), storage);
    return storage;
  }

  // A device storage for the new memory of `host`, which the op reallocated.
  c10::Storage replace(const c10::Storage& host, c10::DeviceIndex index) {
    std::erase_if(entries, [&](const auto& entry) { return entry.first == host.unsafeGetStorageImpl(); });
    return device_storage(host, index);
  }
};

at::Tensor to_device(const at::Tensor& host, c10::DeviceIndex index, StorageMap& map) {
  if (!host.defined() || host.device().type() != c10::DeviceType::CPU) return host;
  return with_layout_of(map.device_storage(host.storage(), index), c10::DispatchKey::PrivateUse1, host);
}

// --- what is known of each op, computed at its first call ---------------------------------------------------

struct OpInfo {
  int generator_argument = -1;
  std::vector<bool> writes;      // per argument: the op writes to it
  bool crosses_devices = false;  // takes tensors from another device by design (indices for indexing)
  bool has_rule = false;         // neuron_rules.json names it: Python records each call
  bool draws_from_cpu_generator = false;  // random, but its CPU kernel takes no generator argument
};

std::mutex ops_mutex;
std::unordered_map<const c10::FunctionSchema*, OpInfo> op_infos;
std::vector<std::string> executed_ops;
// Python callables, never released (they would outlive the interpreter at exit).
py::object* rule_lookup = nullptr;  // (op name) -> bool: has a rule
py::object* rule_record = nullptr;  // (op name) -> None: records one eager call
py::object* dtype_rule = nullptr;   // (dtype) -> bool: a rule names it (and it was recorded)

const std::unordered_set<std::string> kCrossDeviceOps = {
    "aten::index", "aten::index_put", "aten::index_put_", "aten::_index_put_impl_", "aten::set_",
    "aten::lift_fresh", "aten::_copy_from", "aten::_copy_from_and_resize", "aten::copy_", "aten::_to_copy"};

std::string full_name(const c10::OperatorHandle& op) {
  const c10::OperatorName& name = op.operator_name();
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

const OpInfo& op_info(const c10::OperatorHandle& op) {
  const c10::FunctionSchema* schema = &op.schema();
  {
    std::lock_guard<std::mutex> lock(ops_mutex);
    auto found = op_infos.find(schema);
    if (found != op_infos.end()) return found->second;
  }
  OpInfo info;
  const auto& arguments = schema->arguments();
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (arguments[i].name() == "generator") info.generator_argument = static_cast<int>(i);
    info.writes.push_back(arguments[i].alias_info() != nullptr && arguments[i].alias_info()->isWrite());
  }
  info.crosses_devices = kCrossDeviceOps.count(schema->name()) > 0;
  info.draws_from_cpu_generator = schema->name() == "aten::native_dropout";
  std::string name = full_name(op);
  if (rule_lookup) {
    py::gil_scoped_acquire gil;
    info.has_rule = (*rule_lookup)(name).cast<bool>();
  }
  std::lock_guard<std::mutex> lock(ops_mutex);
  executed_ops.push_back(schema->name());
  return op_infos.emplace(schema, info).first->second;
}

// --- random numbers: each device's generator, apart from the CPU's ------------------------------------------

std::mutex generators_mutex;
std::vector<at::Generator> generators;

const at::Generator& default_generator(c10::DeviceIndex index) {
  std::lock_guard<std::mutex> lock(generators_mutex);
  if (generators.empty()) {
    for (c10::DeviceIndex i = 0; i < device_total; ++i) {
      generators.push_back(at::make_generator<at::CPUGeneratorImpl>(at::detail::getDefaultCPUGenerator().current_seed()));
    }
  }
  check_index(index < 0 ? current_index : index);
  return generators[index < 0 ? current_index : index];
}

// --- the fallback: the op's CPU kernel on the memory of the device tensors ---------------------------------

[[noreturn]] void mixed_devices(const c10::OperatorHandle& op, c10::DeviceIndex index) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, neuron:",
              static_cast<int>(index), " and cpu! (when checking argument for ", op.schema().name(), ")");
}

void cpu_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  const OpInfo& info = op_info(op);
  if (info.has_rule) {
    py::gil_scoped_acquire gil;
    (*rule_record)(full_name(op));
  }
  const size_t count = op.schema().arguments().size();
  const size_t first = stack->size() - count;
  c10::DeviceIndex index = -1;  // where new results go; -1: nowhere said yet
  bool results_on_host = false;  // a `device=cpu` argument
  bool host_tensor = false;
  std::vector<std::pair<const c10::TensorImpl*, c10::IValue>> originals;  // CPU view -> device tensor
  std::vector<std::pair<at::Tensor, at::Tensor>> written;  // (CPU view, device tensor) of tensors written to
  StorageMap map;

  c10::DeviceIndex first_tensor_index = -1, other_tensor_index = -1;  // two devices in one op: refused below

  auto to_host = [&](const at::Tensor& tensor, bool write) -> at::Tensor {
    if (on_device(tensor)) {
      c10::DeviceIndex tensor_index = tensor.device().index();
      if (first_tensor_index < 0) first_tensor_index = tensor_index;
      if (tensor_index != first_tensor_index) other_tensor_index = tensor_index;
      if (index < 0) index = tensor_index;
      at::Tensor host = write ? host_view_to_write(tensor) : host_view(tensor);
      if (write) written.emplace_back(host, tensor);
      originals.emplace_back(host.unsafeGetTensorImpl(), tensor);
      map.entries.emplace_back(host.storage().unsafeGetStorageImpl(), tensor.storage());
      return host;
    }
    if (tensor.defined() && tensor.dim() > 0 && tensor.device().type() == c10::DeviceType::CPU) {
      host_tensor = true;
    }
    return tensor;
  };

  for (size_t i = first; i < stack->size(); ++i) {
    c10::IValue& value = (*stack)[i];
    if (value.isTensor()) {
      value = to_host(value.toTensor(), info.writes[i - first]);
    } else if (value.isTensorList()) {
      c10::List<at::Tensor> hosts;
      for (const at::Tensor& tensor : value.toTensorList()) hosts.push_back(to_host(tensor, false));
      value = hosts;
    } else if (value.isList()) {
      c10::List<c10::IValue> items = value.toList();
      bool has_tensor = false;
      for (const c10::IValue& item : items) has_tensor |= item.isTensor();
      if (has_tensor) {
        c10::impl::GenericList hosts(items.elementType());
        for (const c10::IValue& item : items) hosts.push_back(item.isTensor() ? to_host(item.toTensor(), false) : item);
        value = hosts;
      }
    } else if (value.isDevice()) {
      c10::Device device = value.toDevice();
      if (device.type() == kNeuron) {
        index = device.has_index() ? device.index() : current_index;
        check_index(index);
        value = c10::Device(c10::DeviceType::CPU);
      } else {
        results_on_host = true;
      }
    }
  }
  if (index < 0) index = current_index;
  if (host_tensor && !originals.empty() && !info.crosses_devices) mixed_devices(op, index);
  TORCH_CHECK(other_tensor_index < 0 || info.crosses_devices,
              "Expected all tensors to be on the same device, but found at least two devices, neuron:",
              static_cast<int>(first_tensor_index), " and neuron:", static_cast<int>(other_tensor_index),
              "! (when checking argument for ", op.schema().name(), ")");
  if (info.generator_argument >= 0) {
    c10::IValue& generator = (*stack)[first + info.generator_argument];
    if (generator.isNone()) generator = default_generator(index);
  }

  if (info.draws_from_cpu_generator) {
    // Dropout's CPU kernel draws from the CPU's default generator: it draws from the device's here, so that the
    // device's seed and saved states (activation checkpointing replays them) decide its mask, as on a device.
    at::Generator cpu = at::detail::getDefaultCPUGenerator();
    const at::Generator& device = default_generator(index);
    at::Tensor cpu_state = cpu.get_state();
    cpu.set_state(device.get_state());
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
    const_cast<at::Generator&>(device).set_state(cpu.get_state());
    cpu.set_state(cpu_state);
  } else {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  }

  for (auto& [host, device] : written) {
    c10::TensorImpl* impl = device.unsafeGetTensorImpl();
    if (host.storage().data() != device.storage().data()) {  // resized: new memory
      impl->set_storage_keep_dtype(map.replace(host.storage(), index));
    }
    if (host.sizes() != device.sizes() || host.strides() != device.strides() ||
        host.storage_offset() != device.storage_offset()) {
      impl->set_sizes_and_strides(host.sizes(), host.strides(), host.storage_offset());
    }
  }
  if (results_on_host) return;
  auto to_result = [&](const at::Tensor& tensor) -> c10::IValue {
    for (const auto& [host, original] : originals) {
      if (host == tensor.unsafeGetTensorImpl()) return original;  // an in-place or out= result
    }
    return to_device(tensor, index, map);
  };
  const size_t returns = op.schema().returns().size();
  for (size_t i = stack->size() - returns; i < stack->size(); ++i) {
    c10::IValue& value = (*stack)[i];
    if (value.isTensor()) {
      value = to_result(value.toTensor());
    } else if (value.isTensorList()) {
      c10::List<at::Tensor> results;
      for (const at::Tensor& tensor : value.toTensorList()) results.push_back(to_result(tensor).toTensor());
      value = results;
    }
  }
}

// --- kernels that reach the backend without a device tensor, or must keep its storage ----------------------

std::array<int8_t, static_cast<size_t>(at::ScalarType::NumOptions)> dtype_ruled{};  // 0 unasked, 1 no, 2 yes

void check_dtype(at::ScalarType dtype) {
  int8_t& ruled = dtype_ruled[static_cast<size_t>(dtype)];
  if (ruled == 1 || dtype_rule == nullptr) return;
  py::gil_scoped_acquire gil;
  // (a new reference: the call's argument tuple releases one)
  py::object python_dtype = py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(torch::getTHPDtype(dtype)));
  bool named = (*dtype_rule)(python_dtype).cast<bool>();
  ruled = named ? 2 : 1;
}

// Allocates with `make` on the device an allocation names (else the current one), as the allocator reads it.
template <typename Make>
at::Tensor allocate_on(std::optional<at::Device> device, at::ScalarType dtype, Make make) {
  check_dtype(dtype);
  c10::DeviceIndex index = device && device->has_index() ? device->index() : current_index;
  check_index(index);
  c10::DeviceIndex saved = std::exchange(current_index, index);
  try {
    at::Tensor result = make();
    current_index = saved;
    return result;
  } catch (...) {
    current_index = saved;
    throw;
  }
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout>, std::optional<at::Device> device, std::optional<bool>,
                               std::optional<at::MemoryFormat> memory_format) {
  at::ScalarType type = c10::dtype_or_default(dtype);
  return allocate_on(device, type, [&] {
    return at::detail::empty_generic(size, &allocator, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), type,
                                     memory_format);
  });
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout>, std::optional<at::Device> device, std::optional<bool>) {
  at::ScalarType type = c10::dtype_or_default(dtype);
  return allocate_on(device, type, [&] {
    return at::detail::empty_strided_generic(size, stride, &allocator,
                                             c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), type);
  });
}

at::Tensor as_host(const at::Tensor& tensor) { return on_device(tensor) ? host_view(tensor) : tensor; }

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool) {
  as_host(dst).copy_(as_host(self));
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  at::native::resize_(dst, self.sizes());
  as_host(dst).copy_(as_host(self));
  return dst;
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), 0,
                                                             allocator.allocate(0), &allocator, true));
  return at::native::set_storage_cpu_(self, storage, 0, {0}, {});
}

void record_stream(at::Tensor&, c10::Stream) {}  // one stream per device: nothing to record

// Convolutions: on a backend other than the CPU's and CUDA's, PyTorch's convolution calls these two ops.
at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                       c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation,
                       bool transposed, c10::IntArrayRef output_padding, int64_t groups) {
  std::optional<at::Tensor> host_bias;
  if (bias && bias->defined()) host_bias = as_host(*bias);
  at::Tensor result = at::convolution(as_host(input), as_host(weight), host_bias, stride, padding, dilation,
                                      transposed, output_padding, groups);
  StorageMap map;
  return to_device(result, input.device().index(), map);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed, c10::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask) {
  std::vector<int64_t> bias_sizes{grad_output.size(1)};
  auto [grad_input, grad_weight, grad_bias] = at::convolution_backward(
      as_host(grad_output), as_host(input), as_host(weight), bias_sizes, stride, padding, dilation, transposed,
      output_padding, groups, output_mask);
  StorageMap map;
  c10::DeviceIndex index = input.device().index();
  return {to_device(grad_input, index, map), to_device(grad_weight, index, map), to_device(grad_bias, index, map)};
}

// A CPU tensor with the sizes, strides and dtype of `tensor` and no memory: what the CPU's choice of an attention
// kernel reads (a fake tensor, while Dynamo traces, has no memory either).
at::Tensor layout_only(const at::Tensor& tensor) {
  c10::Storage none(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), 0,
                                                          c10::DataPtr(nullptr, c10::Device(c10::DeviceType::CPU)),
                                                          nullptr, false));
  return with_layout_of(std::move(none), c10::DispatchKey::CPU, tensor);
}

// Like TorchNeuron (its SdpBackendSelection), 4-D attention with the same heads in query, key and value takes
// the `overrideable` fused kernel (Python: device.py) where the CPU would take its fused (flash) kernel; the
// rest takes the math decomposition. PyTorch asks through a per-device stub, and through the op.
int64_t fused_sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                         const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                         std::optional<double> scale, bool enable_gqa) {
  const auto math = static_cast<int64_t>(at::SDPBackend::math);
  bool has_mask = attn_mask && attn_mask->defined();
  for (const at::Tensor* tensor : {&query, &key, &value, has_mask ? &*attn_mask : &query}) {
    if (tensor->unsafeGetTensorImpl()->has_symbolic_sizes_strides()) return math;
  }
  std::optional<at::Tensor> mask;
  if (has_mask) mask = layout_only(*attn_mask);
  // Straight to the CPU kernel: no mode (Dynamo's fake tensors, functionalization) is asked on the way.
  int64_t cpu_choice = at::_ops::_fused_sdp_choice::redispatch(
      c10::DispatchKeySet(c10::DispatchKey::CPU), layout_only(query), layout_only(key), layout_only(value), mask,
      dropout_p, is_causal, scale, enable_gqa);
  bool same_heads = query.dim() == 4 && query.size(1) == key.size(1) && key.size(1) == value.size(1);
  bool trainable_mask = has_mask && attn_mask->requires_grad();
  bool fused = cpu_choice == static_cast<int64_t>(at::SDPBackend::flash_attention) && same_heads && !trainable_mask;
  return fused ? static_cast<int64_t>(at::SDPBackend::overrideable) : math;
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>()); }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  // Views and resizes keep the device storage: ATen's own device-independent kernels.
  m.impl("view", at::native::view);
  m.impl("as_strided", at::native::as_strided_tensorimpl);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  m.impl("unfold", at::native::unfold);
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
  m.impl("resize_", at::native::resize_);
  m.impl("set_.source_Storage", static_cast<at::Tensor& (*)(at::Tensor&, at::Storage)>(at::native::set_));
  m.impl("set_.source_Storage_storage_offset", at::native::set_storage_cpu_);
  m.impl("set_", set_empty);
  m.impl("record_stream", record_stream);
  m.impl("_fused_sdp_choice", fused_sdp_choice);
  m.impl("convolution_overrideable", convolution);
  m.impl("convolution_backward_overrideable", convolution_backward);
}

// A copy between the device and the CPU keeps a conjugate or negative view's bit (the CPU copy resolves it),
// so it goes past the keys that would first materialize such a view with a clone, which copies through here.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &fused_sdp_choice)
}  // namespace at::native

namespace {

// --- the device guard: a current device per thread, one stream per device, events complete at once ------

struct NeuronGuard final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNeuron; }
  c10::Device exchangeDevice(c10::Device device) const override {
    c10::Device previous = getDevice();
    if (device.index() != current_index) setDevice(device);
    return previous;
  }
  c10::Device getDevice() const override { return neuron_device(current_index); }
  void setDevice(c10::Device device) const override { set_current(device.index()); }
  void uncheckedSetDevice(c10::Device device) const noexcept override { current_index = device.index(); }
  c10::Stream getStream(c10::Device device) const override {
    return c10::Stream(c10::Stream::DEFAULT, device);
  }
  c10::Stream getDefaultStream(c10::Device device) const override { return getStream(device); }
  c10::Stream getStreamFromGlobalPool(c10::Device device, bool) const override { return getStream(device); }
  c10::Stream getNewStream(c10::Device device, int) const override { return getStream(device); }
  c10::Stream exchangeStream(c10::Stream stream) const override { return stream; }
  c10::DeviceIndex deviceCount() const noexcept override { return device_total; }
  void record(void**, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
  void synchronizeEvent(void*) const override {}
  void synchronizeDevice(const c10::DeviceIndex) const override {}
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuard);

struct NeuronHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex index) const override {
    return default_generator(index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex) const override {
    return at::make_generator<at::CPUGeneratorImpl>();
  }
  at::Device getDeviceFromPtr(void*) const override { return neuron_device(current_index); }
  bool isPinnedPtr(const void* data) const override {
    std::lock_guard<std::mutex> lock(pinned_mutex);
    return pinned.count(const_cast<void*>(data)) > 0;
  }
  c10::Allocator* getPinnedMemoryAllocator() const override { return &pinned_allocator; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t nbytes) const override {
    at::native::resize_bytes_cpu(storage.unsafeGetStorageImpl(), nbytes);
  }
};

// --- what Python calls ---------------------------------------------------------------------------------------

void start(int devices, int first, py::object lookup, py::object record, py::object dtypes) {
  device_total = static_cast<c10::DeviceIndex>(devices);
  first_index = static_cast<c10::DeviceIndex>(first);
  current_index = first_index;
  rule_lookup = new py::object(std::move(lookup));
  rule_record = new py::object(std::move(record));
  dtype_rule = new py::object(std::move(dtypes));
  c10::SetAllocator(kNeuron, &allocator);
  at::RegisterPrivateUse1HooksInterface(new NeuronHooks());
}

at::Tensor device_tensor(const at::Tensor& host, int index) {
  StorageMap map;
  return to_device(host, static_cast<c10::DeviceIndex>(index), map);
}

py::dict memory_stats(int index) {
  std::lock_guard<std::mutex> lock(stats_mutex);
  const MemoryStats& entry = stats[index];
  py::dict result;
  result["current"] = entry.current;
  result["peak"] = entry.peak;
  return result;
}

void reset_peak(int index) {
  std::lock_guard<std::mutex> lock(stats_mutex);
  stats[index].peak = stats[index].current;
}

std::vector<std::string> take_executed_ops() {
  std::lock_guard<std::mutex> lock(ops_mutex);
  return executed_ops;
}

void clear_executed_ops() {
  std::lock_guard<std::mutex> lock(ops_mutex);
  executed_ops.clear();
  op_infos.clear();
  dtype_ruled.fill(0);
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("start", &start, "register the allocator and hooks; the device count, the first current device, the rule callbacks");
  m.def("host", &as_host, "a device tensor as a CPU tensor on the same memory");
  m.def("device_tensor", &device_tensor, "a CPU tensor as a device tensor on the same memory");
  m.def("current_device", [] { return static_cast<int>(current_index); });
  m.def("set_device", [](int index) { set_current(static_cast<c10::DeviceIndex>(index)); });
  m.def("default_generator", [](int index) { return default_generator(static_cast<c10::DeviceIndex>(index)); });
  m.def("memory_stats", &memory_stats);
  m.def("reset_peak", &reset_peak);
  m.def("executed_ops", &take_executed_ops);
  m.def("clear_executed_ops", &clear_executed_ops);
}
