// The device's own kernels: what reaches the backend without a device tensor (allocation), what must keep the
// device storage (views, resizes, copies between devices), and what PyTorch asks of a device backend besides
// the CPU's kernels (convolution, the choice of a fused attention kernel).

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
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
#include <torch/library.h>

#include <utility>

#include "aten/fallback.h"
#include "aten/host_view.h"
#include "aten/op_records.h"
#include "runtime/allocator.h"
#include "runtime/device.h"

namespace standin {

namespace {

// Allocates with `make` on the device an allocation names (else the current one), as the allocator reads it.
template <typename Make>
at::Tensor allocate_on(std::optional<at::Device> device, at::ScalarType dtype, Make make) {
  check_dtype(dtype);
  c10::DeviceIndex index = device && device->has_index() ? device->index() : current_device();
  check_index(index);
  c10::DeviceIndex saved = current_device();
  set_device_unchecked(index);
  try {
    at::Tensor result = make();
    set_device_unchecked(saved);
    return result;
  } catch (...) {
    set_device_unchecked(saved);
    throw;
  }
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout>, std::optional<at::Device> device, std::optional<bool>,
                               std::optional<at::MemoryFormat> memory_format) {
  at::ScalarType type = c10::dtype_or_default(dtype);
  return allocate_on(device, type, [&] {
    return at::detail::empty_generic(size, device_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                     type, memory_format);
  });
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout>, std::optional<at::Device> device, std::optional<bool>) {
  at::ScalarType type = c10::dtype_or_default(dtype);
  return allocate_on(device, type, [&] {
    return at::detail::empty_strided_generic(size, stride, device_allocator(),
                                             c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), type);
  });
}

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
                                                             device_allocator()->allocate(0), device_allocator(),
                                                             true));
  return at::native::set_storage_cpu_(self, storage, 0, {0}, {});
}

void record_stream(at::Tensor&, c10::Stream) {}  // memory is freed when its last tensor is: nothing to record

// Convolutions: on a backend other than the CPU's and CUDA's, PyTorch's convolution calls these two ops. In
// bfloat16 / float16 they accumulate in float32 and round once, as a matrix product does (fallback.cpp).
at::Tensor widened(const at::Tensor& tensor, bool widen) {
  return widen && tensor.defined() ? tensor.to(at::kFloat) : tensor;
}

at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                       c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation,
                       bool transposed, c10::IntArrayRef output_padding, int64_t groups) {
  bool widen = reduced_precision(input.scalar_type()) && weight.scalar_type() == input.scalar_type() &&
               (!bias || !bias->defined() || bias->scalar_type() == input.scalar_type());
  std::optional<at::Tensor> host_bias;
  if (bias && bias->defined()) host_bias = widened(as_host(*bias), widen);
  at::Tensor result = at::convolution(widened(as_host(input), widen), widened(as_host(weight), widen), host_bias,
                                      stride, padding, dilation, transposed, output_padding, groups);
  return to_device(widen ? result.to(input.scalar_type()) : result, input.device().index());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed, c10::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask) {
  bool widen = reduced_precision(input.scalar_type()) && weight.scalar_type() == input.scalar_type() &&
               grad_output.scalar_type() == input.scalar_type();
  std::vector<int64_t> bias_sizes{grad_output.size(1)};
  auto [grad_input, grad_weight, grad_bias] = at::convolution_backward(
      widened(as_host(grad_output), widen), widened(as_host(input), widen), widened(as_host(weight), widen),
      bias_sizes, stride, padding, dilation, transposed, output_padding, groups, output_mask);
  auto narrowed = [&](const at::Tensor& grad) { return widen && grad.defined() ? grad.to(input.scalar_type()) : grad; };
  StorageMap map;
  c10::DeviceIndex index = input.device().index();
  return {to_device(narrowed(grad_input), index, map), to_device(narrowed(grad_weight), index, map),
          to_device(narrowed(grad_bias), index, map)};
}

// Like TorchNeuron (its SdpBackendSelection), 4-D attention with the same heads in query, key and value takes
// the `overrideable` fused kernel (Python: kernels.py) where the CPU would take its fused (flash) kernel; the
// rest takes the math decomposition. PyTorch asks through a per-device stub, and through the op. An attention
// mask on the CPU is refused as any other CPU argument is (the fused kernel would read it from host memory).
int64_t fused_sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                         const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                         std::optional<double> scale, bool enable_gqa) {
  const auto math = static_cast<int64_t>(at::SDPBackend::math);
  bool has_mask = attn_mask && attn_mask->defined();
  if (has_mask && attn_mask->dim() > 0 && attn_mask->device().type() == c10::DeviceType::CPU) {
    mixed_devices("aten::scaled_dot_product_attention", query.device().index());
  }
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

}  // namespace

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

}  // namespace standin

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &standin::fused_sdp_choice)
}  // namespace at::native
