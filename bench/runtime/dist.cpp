#include "bench/runtime/dist.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <thread>

#include "bench/runtime/backend.h"

namespace gpt2 {

namespace {
int env_int(const char* name, int def, int min) {
  const char* v = std::getenv(name);
  if (!v || !*v) return def;
  try {
    size_t used = 0;
    const int x = std::stoi(v, &used);
    if (used == std::string(v).size() && x >= min) return x;
  } catch (const std::exception&) {
  }
  throw DistError(std::string("environment variable ") + name + "='" + v + "' is not an integer >= " +
                  std::to_string(min));
}

std::string what(const std::exception& e) {
  if (auto* c = dynamic_cast<const c10::Error*>(&e)) return c->what_without_backtrace();
  return e.what();
}
}  // namespace

std::optional<DistEnv> dist_env_from_environment() {
  if (!std::getenv("WORLD_SIZE")) return std::nullopt;
  DistEnv e;
  e.world_size = env_int("WORLD_SIZE", 1, 1);
  e.rank = env_int("RANK", 0, 0);
  e.local_rank = env_int("LOCAL_RANK", e.rank, 0);
  e.master_port = env_int("MASTER_PORT", e.master_port, 1);
  if (const char* a = std::getenv("MASTER_ADDR"); a && *a) e.master_addr = a;
  if (e.rank >= e.world_size)
    throw DistError("RANK=" + std::to_string(e.rank) + " is not below WORLD_SIZE=" + std::to_string(e.world_size));
  return e;
}

struct Dist::Impl {
  DistEnv env;
  std::chrono::milliseconds timeout;
  c10::intrusive_ptr<c10d::Store> store, hb_store;  // hb_store: the heartbeat thread's own connection
  c10::intrusive_ptr<c10d::ProcessGroup> pg;
  std::string backend;
  std::thread heartbeat;
  std::atomic<bool> stop{false};
  int64_t sent = 0, received = 0;

  c10::intrusive_ptr<c10d::Store> connect(bool server) const {
    c10d::TCPStoreOptions o;
    o.port = static_cast<uint16_t>(env.master_port);
    o.isServer = server;
    o.numWorkers = env.world_size;
    o.waitWorkers = false;
    o.timeout = timeout;
    return c10::make_intrusive<c10d::PrefixStore>("gpt2bench",
                                                  c10::make_intrusive<c10d::TCPStore>(env.master_addr, o));
  }
  std::vector<int64_t> beats() const {
    std::vector<int64_t> b;
    for (int r = 0; r < env.world_size; ++r) b.push_back(hb_store->add("hb/" + std::to_string(r), 0));
    return b;
  }
};

DeviceInfo rank_device(const std::string& want, bool pinned, const std::optional<DistEnv>& env) {
  DeviceInfo dev = detect_device(want);
  if (!env || env->world_size <= 1) return dev;
  if (dev.cuda() && !pinned) dev = detect_device("cuda:" + std::to_string(env->local_rank));
  dev.world_size = env->world_size;
  return dev;
}

Dist::Dist(const DistEnv& env, const DeviceInfo& dev, std::chrono::milliseconds timeout) : impl_(new Impl) {
  auto& m = *impl_;
  m.env = env;
  m.timeout = timeout;
  // torchrun's agent may host the store itself (TORCHELASTIC_USE_AGENT_STORE); else rank 0 does.
  const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  const bool agent_store = agent && std::string(agent) == "True";
  // A peer that dies leaves its sockets closed; a write to one must fail with EPIPE (which the
  // collective guard turns into "lost rank N"), not kill this rank with SIGPIPE before it can say so.
  std::signal(SIGPIPE, SIG_IGN);
  try {
    m.store = m.connect(env.rank == 0 && !agent_store);
    m.hb_store = m.connect(false);
    m.pg = c10::make_intrusive<c10d::ProcessGroup>(m.store, env.rank, env.world_size);
    // Gloo for CPU tensors always (on CUDA too, for the small host-side collectives), NCCL for CUDA ones.
    auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
    const bool loopback = env.master_addr == "127.0.0.1" || env.master_addr == "localhost";
    opts->devices.push_back(loopback ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                     : c10d::ProcessGroupGloo::createDefaultDevice());
    auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>("gloo", m.store), env.rank, env.world_size, opts);
    m.pg->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::GLOO, gloo);
    m.pg->setDefaultBackend(c10d::ProcessGroup::GLOO);
    m.backend = "gloo";
    if (dev.cuda()) {
      auto nccl = backend_for(dev).collectives(c10::make_intrusive<c10d::PrefixStore>("nccl", m.store), env.rank,
                                               env.world_size, timeout);
      m.pg->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::NCCL, nccl);
      m.pg->setDefaultBackend(c10d::ProcessGroup::NCCL);
      m.backend = "nccl";
    }
  } catch (const std::exception& e) {
    throw DistError("rank " + std::to_string(env.rank) + " could not join the group at " + env.master_addr + ":" +
                    std::to_string(env.master_port) + ": " + what(e));
  }
  m.heartbeat = std::thread([&m] {
    const std::string key = "hb/" + std::to_string(m.env.rank);
    while (!m.stop.load()) {
      try {
        m.hb_store->add(key, 1);
      } catch (const std::exception&) {
        return;  // the store is gone; the main thread finds out on its next collective
      }
      for (int i = 0; i < 5 && !m.stop.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
}

Dist::~Dist() {
  impl_->stop = true;
  if (impl_->heartbeat.joinable()) impl_->heartbeat.join();
}

int Dist::rank() const { return impl_->env.rank; }
int Dist::world_size() const { return impl_->env.world_size; }
std::string Dist::backend() const { return impl_->backend; }

std::string Dist::lost_ranks() {
  try {
    const auto before = impl_->beats();
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    const auto after = impl_->beats();
    std::string lost;
    for (size_t r = 0; r < before.size(); ++r)
      if (after[r] == before[r]) lost += (lost.empty() ? "rank " : ", rank ") + std::to_string(r);
    return lost;
  } catch (const std::exception&) {
    return impl_->env.rank == 0 ? "the rendezvous store" : "rank 0 (it hosts the rendezvous store)";
  }
}

void Dist::rethrow(const std::exception& e) {
  const std::string lost = lost_ranks();
  throw DistError("rank " + std::to_string(rank()) + ": collective failed (" + what(e) + "); " +
                  (lost.empty() ? "every rank still beats" : "lost " + lost + ": it stopped responding"));
}

void Dist::broadcast_from_rank0(const std::vector<at::Tensor>& tensors) {
  at::NoGradGuard no_grad;  // parameters are leaves that require grad: written in place, untracked
  guarded([&] { c10d::broadcast_coalesced(impl_->pg, tensors, 256u << 20, 0); });
}

std::vector<double> Dist::allgather(const std::vector<double>& mine) {
  return guarded([&] {
    std::vector<at::Tensor> in = {at::tensor(mine, at::kDouble)};
    std::vector<std::vector<at::Tensor>> out(1);
    for (int r = 0; r < world_size(); ++r) out[0].push_back(at::empty_like(in[0]));
    impl_->pg->allgather(out, in)->wait(impl_->timeout);
    std::vector<double> all;
    for (const auto& t : out[0])
      for (int64_t i = 0; i < t.numel(); ++i) all.push_back(t[i].item<double>());
    return all;
  });
}

void Dist::barrier() {
  guarded([&] { impl_->pg->barrier()->wait(impl_->timeout); });
}

void Dist::post(const std::string& message) {
  const std::string key = "msg/" + std::to_string(impl_->sent++);
  guarded([&] { impl_->store->set(key, std::vector<uint8_t>(message.begin(), message.end())); });
}

std::string Dist::next_message() {
  const std::string key = "msg/" + std::to_string(impl_->received++);
  return guarded([&] {
    impl_->store->wait({key}, std::chrono::hours(24 * 7));
    const auto v = impl_->store->get(key);
    return std::string(v.begin(), v.end());
  });
}

namespace {
// PyTorch's DistributedDataParallel engine, driven from C++: parameters in reverse order of
// definition (the order backward produces their gradients), a 1 MiB first bucket then 25 MiB
// buckets, all-reduce of each bucket launched as soon as its gradients are ready, averaged.
class ReducerSync : public GradSync {
 public:
  ReducerSync(const std::vector<at::Tensor>& params, const c10::intrusive_ptr<c10d::ProcessGroup>& pg) {
    constexpr size_t kFirst = 1u << 20, kCap = 25u << 20;
    auto [buckets, limits] = c10d::compute_bucket_assignment_by_size(params, {kFirst, kCap},
                                                                     std::vector<bool>(params.size(), false));
    std::reverse(buckets.begin(), buckets.end());
    std::reverse(limits.begin(), limits.end());
    reducer_ = std::make_unique<c10d::Reducer>(
        params, buckets, pg, std::vector<bool>(params.size(), false), kCap, /*find_unused_parameters=*/false,
        /*gradient_as_bucket_view=*/false, std::unordered_map<size_t, std::string>{}, kFirst,
        /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false,
        std::vector<int64_t>(limits.begin(), limits.end()));
  }
  void prepare_for_forward() override { reducer_->prepare_for_forward(); }
  void prepare_for_backward() override { reducer_->prepare_for_backward({}); }

 private:
  std::unique_ptr<c10d::Reducer> reducer_;
};
}  // namespace

std::unique_ptr<GradSync> Dist::grad_sync(const std::vector<at::Tensor>& params) {
  return std::make_unique<ReducerSync>(params, impl_->pg);
}

}  // namespace gpt2
