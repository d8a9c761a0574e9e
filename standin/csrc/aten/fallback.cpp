// Each device tensor argument is seen as a CPU tensor on the same memory, the op's CPU kernel runs, and the
// results are the device tensors it wrote to or device tensors on the memory of each new result. No data is
// copied; the cost per op is a few tensor headers.

#include "aten/fallback.h"

#include <torch/library.h>

#include <algorithm>
#include <optional>

#include "aten/host_view.h"
#include "aten/op_records.h"
#include "runtime/device.h"
#include "runtime/generator.h"

namespace standin {

void mixed_devices(const std::string& op_name, c10::DeviceIndex index) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, neuron:",
              static_cast<int>(index), " and cpu! (when checking argument for ", op_name, ")");
}

namespace {

// Runs the op's CPU kernel; a random op draws from the device's generator (the one it was given, else the
// device's default), so that the device's seed and saved states decide its numbers, as on a device.
void run_on_cpu(const c10::OperatorHandle& op, const OpInfo& info, torch::jit::Stack* stack, size_t first,
                c10::DeviceIndex index) {
  // How many values the op drew: as many as its largest result holds (a Philox counter's measure).
  auto redispatch = [&]() -> uint64_t {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
    uint64_t drawn = 1;
    for (size_t i = first; i < stack->size(); ++i) {
      if ((*stack)[i].isTensor()) drawn = std::max<uint64_t>(drawn, (*stack)[i].toTensor().numel());
    }
    return drawn;
  };
  if (info.generator_argument >= 0) {
    c10::IValue& argument = (*stack)[first + info.generator_argument];
    at::Generator generator = argument.isNone() ? default_generator(index) : argument.toGenerator();
    TORCH_CHECK(is_device_generator(generator), "Expected a 'neuron' device type for generator but found '",
                generator.device().type(), "'");
    at::Generator cpu = at::make_generator<at::CPUGeneratorImpl>();
    argument = cpu;
    drawing_from(generator, cpu, redispatch);
  } else if (info.draws_from_cpu_generator) {
    // Dropout's CPU kernel draws from the CPU's default generator.
    drawing_from(default_generator(index), at::detail::getDefaultCPUGenerator(), redispatch);
  } else {
    redispatch();
  }
}

// The dtype shared by every floating tensor argument when it is bfloat16 or float16, else none (other dtypes, and
// mixed ones, which the CPU kernel refuses as a device does, are left as they are).
std::optional<at::ScalarType> shared_reduced_precision(const torch::jit::Stack& stack, size_t first) {
  std::optional<at::ScalarType> shared;
  for (size_t i = first; i < stack.size(); ++i) {
    if (!stack[i].isTensor() || !stack[i].toTensor().is_floating_point()) continue;
    at::ScalarType type = stack[i].toTensor().scalar_type();
    if (!reduced_precision(type) || (shared && *shared != type)) return std::nullopt;
    shared = type;
  }
  return shared;
}

void cpu_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  const OpInfo& info = op_info(op);
  if (info.has_rule) record_rule_call(op);
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
        index = device.has_index() ? device.index() : current_device();
        check_index(index);
        value = c10::Device(c10::DeviceType::CPU);
      } else {
        results_on_host = true;
      }
    }
  }
  if (index < 0) index = current_device();
  if (host_tensor && !originals.empty() && !info.crosses_devices) mixed_devices(op.schema().name(), index);
  TORCH_CHECK(other_tensor_index < 0 || info.crosses_devices,
              "Expected all tensors to be on the same device, but found at least two devices, neuron:",
              static_cast<int>(first_tensor_index), " and neuron:", static_cast<int>(other_tensor_index),
              "! (when checking argument for ", op.schema().name(), ")");

  // A matrix product of bfloat16 / float16 operands accumulates in float32 and rounds once (OpInfo): the op runs
  // on float32 copies, into a float32 result that is rounded into the tensor it writes to (`out=`), else returned.
  std::optional<at::ScalarType> reduced = info.accumulates_in_float ? shared_reduced_precision(*stack, first) : std::nullopt;
  std::vector<at::Tensor> outs;  // the CPU views of the `out=` tensors, in the order of the op's returns
  if (reduced) {
    for (size_t i = first; i < stack->size(); ++i) {
      if (!(*stack)[i].isTensor()) continue;
      const at::Tensor tensor = (*stack)[i].toTensor();
      if (info.writes[i - first]) outs.push_back(tensor);
      (*stack)[i] = info.writes[i - first] ? at::empty({0}, tensor.options().dtype(at::kFloat)) : tensor.to(at::kFloat);
    }
  }
  run_on_cpu(op, info, stack, first, index);
  if (reduced) {
    const size_t returns = op.schema().returns().size();
    for (size_t i = 0; i < returns; ++i) {
      c10::IValue& value = (*stack)[stack->size() - returns + i];
      at::Tensor result = value.toTensor();
      if (i < outs.size()) {
        outs[i].resize_(result.sizes()).copy_(result);
        value = outs[i];
      } else {
        value = result.to(*reduced);
      }
    }
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

}  // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>()); }

}  // namespace standin
