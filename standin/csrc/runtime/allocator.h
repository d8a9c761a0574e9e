// Device memory is host memory: every storage on `neuron:N` is an allocation of the CPU allocator, held by a CPU
// storage that the device storage keeps alive. Pinned host memory is ordinary host memory, remembered as pinned.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Storage.h>

namespace standin {

// A DataPtr on `neuron:index` over the memory of `host`, which it keeps alive; counted in the memory figures.
c10::DataPtr device_data(c10::Storage host, c10::DeviceIndex index);
// The CPU storage that holds the memory of a device storage. A device storage the allocator did not make (PyTorch's
// serialization wraps a device pointer with `from_blob`) is host memory too: a CPU storage borrows it.
c10::Storage host_storage(const c10::Storage& device_storage);

c10::Allocator* device_allocator();  // allocates on the current device
c10::Allocator* pinned_allocator();
bool is_pinned(const void* data);

struct MemoryStats {
  int64_t current = 0;
  int64_t peak = 0;
};
MemoryStats memory_stats(c10::DeviceIndex index);  // bytes of the live device storages
void reset_peak(c10::DeviceIndex index);

}  // namespace standin
