// The device guard: each thread's current device and, per device, its current stream; events.
//
// Work on the stand-in is done when its call returns, so a stream is a name that PyTorch's stream and event code
// (FSDP2's, DDP's, torch.Stream's, torch.Event's) can create, make current, compare and wait on, and an event
// holds the host time it was recorded at (for elapsed_time); waits and queries return at once.

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <atomic>
#include <chrono>
#include <vector>

#include "runtime/device.h"

namespace standin {

namespace {

std::atomic<c10::StreamId> next_stream_id{1};  // 0: each device's default stream
thread_local std::vector<c10::StreamId> current_streams;  // per device

c10::StreamId& current_stream_id(c10::DeviceIndex index) {
  index = or_current(index);
  check_index(index);
  if (current_streams.size() < static_cast<size_t>(device_count())) current_streams.resize(device_count(), 0);
  return current_streams[index];
}

c10::Stream stream_of(c10::Device device, c10::StreamId id) {
  c10::DeviceIndex index = or_current(device.index());
  check_index(index);
  return c10::Stream(c10::Stream::UNSAFE, neuron_device(index), id);
}

struct Event {
  std::chrono::steady_clock::time_point recorded;
};

struct NeuronGuard final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNeuron; }
  c10::Device exchangeDevice(c10::Device device) const override {
    c10::Device previous = getDevice();
    if (device.index() != current_device()) setDevice(device);
    return previous;
  }
  c10::Device getDevice() const override { return neuron_device(current_device()); }
  void setDevice(c10::Device device) const override { set_device(device.index()); }
  void uncheckedSetDevice(c10::Device device) const noexcept override { set_device_unchecked(device.index()); }
  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }

  c10::Stream getStream(c10::Device device) const override {
    return stream_of(device, current_stream_id(device.index()));
  }
  c10::Stream getDefaultStream(c10::Device device) const override { return stream_of(device, 0); }
  c10::Stream getNewStream(c10::Device device, int) const override { return stream_of(device, next_stream_id++); }
  c10::Stream getStreamFromGlobalPool(c10::Device device, bool) const override { return getNewStream(device, 0); }
  c10::Stream exchangeStream(c10::Stream stream) const override {
    c10::StreamId& current = current_stream_id(stream.device_index());
    c10::Stream previous = stream_of(stream.device(), current);
    current = stream.id();
    return previous;
  }
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
  void synchronizeDevice(const c10::DeviceIndex) const override {}
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}

  void record(void** event, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {
    if (*event == nullptr) *event = new Event();
    static_cast<Event*>(*event)->recorded = std::chrono::steady_clock::now();
  }
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void synchronizeEvent(void*) const override {}
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<Event*>(event);
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start != nullptr && end != nullptr, "Both events must be recorded before calculating elapsed time.");
    auto elapsed = static_cast<Event*>(end)->recorded - static_cast<Event*>(start)->recorded;
    return std::chrono::duration<double, std::milli>(elapsed).count();
  }
};

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuard);

}  // namespace standin
