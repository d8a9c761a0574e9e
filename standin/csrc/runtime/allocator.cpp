#include "runtime/allocator.h"

#include <c10/core/CPUAllocator.h>

#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "runtime/device.h"

namespace standin {

namespace {

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

struct NeuronAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    c10::Allocator* cpu = c10::GetCPUAllocator();
    c10::Storage host(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), nbytes,
                                                            cpu->allocate(nbytes), cpu, /*resizable=*/false));
    return device_data(std::move(host), current_device());
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};
NeuronAllocator allocator;

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
PinnedAllocator pinned_host_allocator;

}  // namespace

c10::DataPtr device_data(c10::Storage host, c10::DeviceIndex index) {
  void* data = host.mutable_data();  // materializes a copy-on-write storage before its memory is shared
  int64_t nbytes = static_cast<int64_t>(host.nbytes());
  count_bytes(index, nbytes);
  return c10::DataPtr(data, new Block{std::move(host), nbytes, index}, &release_block, neuron_device(index));
}

c10::Storage host_storage(const c10::Storage& device_storage) {
  auto* block = device_storage.data_ptr().cast_context<Block>(&release_block);
  if (block != nullptr) return block->host;
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), device_storage.nbytes(),
      c10::DataPtr(device_storage.mutable_data(), c10::Device(c10::DeviceType::CPU)), nullptr, /*resizable=*/false));
}

c10::Allocator* device_allocator() { return &allocator; }

c10::Allocator* pinned_allocator() { return &pinned_host_allocator; }

bool is_pinned(const void* data) {
  std::lock_guard<std::mutex> lock(pinned_mutex);
  return pinned.count(const_cast<void*>(data)) > 0;
}

MemoryStats memory_stats(c10::DeviceIndex index) {
  std::lock_guard<std::mutex> lock(stats_mutex);
  return stats[index];
}

void reset_peak(c10::DeviceIndex index) {
  std::lock_guard<std::mutex> lock(stats_mutex);
  stats[index].peak = stats[index].current;
}

}  // namespace standin
