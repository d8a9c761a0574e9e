// A device tensor seen as a CPU tensor on the same memory, and a CPU tensor seen as a device tensor: no data is
// copied, only tensor headers are made.
#pragma once

#include <ATen/ATen.h>

#include <utility>
#include <vector>

namespace standin {

bool on_device(const at::Tensor& tensor);
// A device tensor as a CPU tensor on its memory (any other tensor as it is).
at::Tensor as_host(const at::Tensor& tensor);
at::Tensor host_view(const at::Tensor& tensor);
// The CPU view of a tensor an op writes to: a CPU kernel that resizes it (an `out=` made with `empty({0})`)
// reallocates a storage of the view's own, never the memory the device storage holds.
at::Tensor host_view_to_write(const at::Tensor& tensor);

// One op's device storages, by the CPU storage that holds their memory: a result on one of them (a view, an
// in-place result) lands on it, and results that share new memory share one new device storage.
struct StorageMap {
  std::vector<std::pair<const c10::StorageImpl*, c10::Storage>> entries;

  c10::Storage device_storage(const c10::Storage& host, c10::DeviceIndex index);
  // A device storage for the new memory of `host`, which the op reallocated.
  c10::Storage replace(const c10::Storage& host, c10::DeviceIndex index);
};

// A CPU tensor as a tensor on `neuron:index` on the same memory (any other tensor as it is).
at::Tensor to_device(const at::Tensor& host, c10::DeviceIndex index, StorageMap& map);
at::Tensor to_device(const at::Tensor& host, c10::DeviceIndex index);
// A CPU tensor with the sizes, strides and dtype of `tensor` and no memory (what a kernel's choice reads).
at::Tensor layout_only(const at::Tensor& tensor);

}  // namespace standin
