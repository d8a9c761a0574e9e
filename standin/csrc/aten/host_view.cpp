#include "aten/host_view.h"

#include <c10/core/CPUAllocator.h>

#include "runtime/allocator.h"
#include "runtime/device.h"

namespace standin {

namespace {

at::Tensor with_layout_of(c10::Storage storage, c10::DispatchKey key, const at::Tensor& like) {
  auto impl = c10::make_intrusive<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(key), like.dtype());
  impl->set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  impl->_set_conj(like.is_conj());
  impl->_set_neg(like.is_neg());
  return at::Tensor(std::move(impl));
}

void release_borrowed(void* pointer) { delete static_cast<c10::Storage*>(pointer); }

}  // namespace

bool on_device(const at::Tensor& tensor) { return tensor.defined() && tensor.device().type() == kNeuron; }

at::Tensor host_view(const at::Tensor& tensor) {
  return with_layout_of(host_storage(tensor.storage()), c10::DispatchKey::CPU, tensor);
}

at::Tensor as_host(const at::Tensor& tensor) { return on_device(tensor) ? host_view(tensor) : tensor; }

at::Tensor host_view_to_write(const at::Tensor& tensor) {
  c10::Storage host = host_storage(tensor.storage());
  c10::DataPtr borrowed(host.mutable_data(), new c10::Storage(host), &release_borrowed,
                        c10::Device(c10::DeviceType::CPU));
  c10::Storage storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), host.nbytes(),
                                                             std::move(borrowed), c10::GetCPUAllocator(),
                                                             /*resizable=*/true));
  return with_layout_of(std::move(storage), c10::DispatchKey::CPU, tensor);
}

c10::Storage StorageMap::device_storage(const c10::Storage& host, c10::DeviceIndex index) {
  for (auto& [key, storage] : entries) {
    if (key == host.unsafeGetStorageImpl()) return storage;
  }
  c10::Storage storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), host.nbytes(),
                                                             device_data(host, index), device_allocator(),
                                                             /*resizable=*/true));
  entries.emplace_back(host.unsafeGetStorageImpl(), storage);
  return storage;
}

c10::Storage StorageMap::replace(const c10::Storage& host, c10::DeviceIndex index) {
  std::erase_if(entries, [&](const auto& entry) { return entry.first == host.unsafeGetStorageImpl(); });
  return device_storage(host, index);
}

at::Tensor to_device(const at::Tensor& host, c10::DeviceIndex index, StorageMap& map) {
  if (!host.defined() || host.device().type() != c10::DeviceType::CPU) return host;
  return with_layout_of(map.device_storage(host.storage(), index), c10::DispatchKey::PrivateUse1, host);
}

at::Tensor to_device(const at::Tensor& host, c10::DeviceIndex index) {
  StorageMap map;
  return to_device(host, index, map);
}

at::Tensor layout_only(const at::Tensor& tensor) {
  c10::Storage none(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), 0,
                                                          c10::DataPtr(nullptr, c10::Device(c10::DeviceType::CPU)),
                                                          nullptr, false));
  return with_layout_of(std::move(none), c10::DispatchKey::CPU, tensor);
}

}  // namespace standin
