// defines: Backend — what a kind of device does its own way: devices, timers, memory meters, batch movers,
//          side streams, graphs, collectives, synchronize/empty_cache: cpu_backend.cpp, cuda/cuda_backend.cpp in
//          a CUDA build (else no_cuda.cpp: cuda_backend() == nullptr). CMake picks the file; no code asks which.
#pragma once
#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/runtime/device.h"
#include "bench/runtime/memory.h"

namespace c10d {
class Store;
class Backend;
}  // namespace c10d

namespace gpt2 {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual int device_count() const = 0;  // never throws; 0 without a driver or a device
  // Makes `index` current and initialises the device's state (CUDA: context and caching allocator;
  // allocator calls before that fail with "Invalid device argument").
  virtual void activate(int index) const = 0;
  virtual DeviceInfo describe(int index) const = 0;
  virtual std::unique_ptr<StepTimer> step_timer(int index) const = 0;
  virtual std::unique_ptr<MemoryMeter> memory_meter(int index) const = 0;
  // Pinned host buffers copied ahead on a side stream; throws where the device has none.
  virtual std::unique_ptr<BatchMover> pinned_mover(Loader& loader, int index) const = 0;
  virtual std::unique_ptr<SideStream> side_stream(int index) const = 0;  // kernels/side_stream.h
  // `pass` captured once as a device graph; calling the result replays it. Throws where the device has none.
  virtual std::function<void()> graphed(std::function<void()> pass) const = 0;
  // The collective backend for this device's tensors under DDP; null where gloo (always set) serves.
  virtual c10::intrusive_ptr<c10d::Backend> collectives(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                        int size, std::chrono::milliseconds timeout) const = 0;
  virtual void synchronize() const = 0;
  virtual void empty_cache() const = 0;
  // "" while the device can still be used; else why not. CUDA: an error that outlives cudaGetLastError (a
  // kernel's illegal address, a device assert: the process's context is lost, and every later call fails).
  virtual std::string lost_context() const = 0;
  virtual std::string library_report() const = 0;  // for `gpt2bench doctor`; empty when nothing to say
};

const Backend& cpu_backend();
const Backend* cuda_backend();  // nullptr in a build without CUDA
const Backend& backend_for(const DeviceInfo& d);

}  // namespace gpt2
