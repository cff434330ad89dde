// defines: DistEnv (torchrun's environment), Dist (a c10d process group, Gloo or NCCL, over a TCPStore, with
//          heartbeats to name a lost rank), GradSync (c10d's Reducer, as PyTorch's DDP). No c10d headers here.
#pragma once
#include <ATen/core/Tensor.h>

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/runtime/device_info.h"

namespace gpt2 {

struct DistEnv {
  int rank = 0, world_size = 1, local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
};
// RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT as torchrun sets them; nullopt when
// WORLD_SIZE is unset. Malformed values are an error naming the variable.
std::optional<DistEnv> dist_env_from_environment();
// The device this process runs on: `want` ("auto", "cpu", "cuda:N"; bench/runtime/device.h); under
// torchrun (env with world_size > 1) each rank its own GPU, cuda:LOCAL_RANK, unless `pinned` (the
// user named one with --device), and world_size set. Used by every command that trains.
DeviceInfo rank_device(const std::string& want, bool pinned, const std::optional<DistEnv>& env);

struct DistError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Synchronises gradients during backward: prepare() before each forward+backward.
class GradSync {
 public:
  virtual ~GradSync() = default;
  virtual void prepare_for_forward() = 0;
  virtual void prepare_for_backward() = 0;
};

class Dist {
 public:
  // Joins the group (rank 0 hosts the TCPStore). Collectives that take longer than `timeout` fail
  // with a DistError naming the ranks that stopped beating.
  Dist(const DistEnv& env, const DeviceInfo& dev, std::chrono::milliseconds timeout);
  ~Dist();
  int rank() const;
  int world_size() const;
  std::string backend() const;  // "gloo" | "nccl"

  void broadcast_from_rank0(const std::vector<at::Tensor>& tensors);  // in place
  std::vector<double> allgather(const std::vector<double>& mine);    // all ranks' values, rank-major
  void barrier();
  std::unique_ptr<GradSync> grad_sync(const std::vector<at::Tensor>& params);

  // Rank 0 posts ordered messages to the others through the store; they wait as long as needed
  // (rank 0 may be running rungs on its own for hours), but fail at once if rank 0 is gone.
  void post(const std::string& message);
  std::string next_message();

  // Ranks whose heartbeat stopped over the last few seconds, e.g. "rank 1"; empty if none.
  std::string lost_ranks();
  // Runs `f`; turns a collective's failure into a DistError that names the lost rank(s).
  template <class F>
  auto guarded(F&& f) -> decltype(f());
  // Throws a DistError for `e` (an error from a collective, or from the Reducer inside backward)
  // that names the ranks which stopped beating.
  [[noreturn]] void rethrow(const std::exception& e);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

template <class F>
auto Dist::guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const DistError&) {
    throw;
  } catch (const std::exception& e) {
    rethrow(e);
  }
}

}  // namespace gpt2
