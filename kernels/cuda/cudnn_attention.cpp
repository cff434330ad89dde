// cudnn_causal_attention (kernels/attention.h): cuDNN's fused flash attention through graphs of our own (cuDNN's
// frontend), as ATen builds its cuDNN SDPA (aten/src/ATen/native/cudnn/MHA.cpp), with the tensors in the layouts the
// step has: Q, K, V read in place from the (B, T, 3C) QKV output, O written (B, T, C), and the backward's dQ, dK,
// dV into one (B, T, 3C) tensor. ATen's cuDNN handle, stream, caching allocator and CUDA generator: capture safe.
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include "kernels/attention.h"

#if GPT2_HAVE_CUDNN_FE
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/PhiloxCudaState.h>
#include <ATen/cudnn/Handle.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <cudnn_frontend.h>
#include <torch/autograd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

// ATen's (libtorch_cuda, exported; declared in a .cuh): the generator's seed and offset into two device int64s,
// from the values or, under graph capture, from the graph's own offset.
namespace at::cuda::philox {
void unpack_cudnn_wrapper(at::PhiloxCudaState arg, int64_t* seed_ptr, int64_t* offset_ptr, cudaStream_t stream);
}

namespace gpt2::kernels {
namespace {

namespace fe = cudnn_frontend;
using Graph = std::shared_ptr<fe::graph::Graph>;
using Attrs = fe::graph::Tensor_attributes;

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kSeed, kOffset, kDO, kDQ, kDK, kDV };

struct Shape {
  int64_t B, H, T, D;
  std::vector<int64_t> dims() const { return {B, H, T, D}; }
  std::vector<int64_t> in_qkv() const { return {T * 3 * H * D, D, 3 * H * D, 1}; }  // a head of (B, T, 3C)
  std::vector<int64_t> in_bt() const { return {T * H * D, D, H * D, 1}; }           // a head of (B, T, C)
};

void check(fe::error_t status, const char* what) {
  TORCH_CHECK(status.is_good(), "cudnn_causal_attention: cuDNN's ", what, " failed: ", status.get_message());
}

Graph new_graph(at::ScalarType dtype) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(dtype == at::kBFloat16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

std::shared_ptr<Attrs> tensor(const Graph& g, Uid uid, const char* name, const std::vector<int64_t>& dims,
                              const std::vector<int64_t>& strides) {
  return g->tensor(Attrs().set_uid(uid).set_name(name).set_dim(dims).set_stride(strides));
}

std::pair<std::shared_ptr<Attrs>, std::shared_ptr<Attrs>> seed_offset(const Graph& g) {
  auto one = [&](Uid uid, const char* name) {
    return g->tensor(
        Attrs().set_uid(uid).set_name(name).set_dim({1, 1, 1, 1}).set_stride({1, 1, 1, 1}).set_data_type(
            fe::DataType_t::INT64));
  };
  return {one(kSeed, "seed"), one(kOffset, "offset")};
}

// What both directions set alike: the causal mask, the 1/sqrt(head size) scale, the dropout's seed and offset.
template <typename Opts>
Opts causal(Opts opts, const Graph& g, const Shape& s, double p) {
  opts.set_causal_mask(true).set_attn_scale(static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.D))));
  if (p > 0) {
    auto [seed, offset] = seed_offset(g);
    opts.set_dropout(static_cast<float>(p), seed, offset);
  }
  return opts;
}

// Q, K and V: heads read in place from the (B, T, 3C) projection output.
std::array<std::shared_ptr<Attrs>, 3> qkv_tensors(const Graph& g, const Shape& s) {
  return {tensor(g, kQ, "Q", s.dims(), s.in_qkv()), tensor(g, kK, "K", s.dims(), s.in_qkv()),
          tensor(g, kV, "V", s.dims(), s.in_qkv())};
}

Graph forward_graph(const Shape& s, at::ScalarType dtype, double p) {
  Graph g = new_graph(dtype);
  const auto opts = causal(fe::graph::SDPA_attributes().set_name("causal_attention").set_generate_stats(true), g, s, p);
  const auto [q, k, v] = qkv_tensors(g, s);
  auto [o, stats] = g->sdpa(q, k, v, opts);
  o->set_output(true).set_uid(kO).set_dim(s.dims()).set_stride(s.in_bt());
  stats->set_output(true).set_uid(kStats).set_data_type(fe::DataType_t::FLOAT);
  return g;
}

Graph backward_graph(const Shape& s, at::ScalarType dtype, double p) {
  Graph g = new_graph(dtype);
  const auto opts = causal(fe::graph::SDPA_backward_attributes().set_name("causal_attention_backward"), g, s, p);
  const auto [q, k, v] = qkv_tensors(g, s);
  auto stats = g->tensor(Attrs().set_uid(kStats).set_name("stats").set_dim({s.B, s.H, s.T, 1})
                             .set_stride({s.H * s.T, s.T, 1, 1}).set_data_type(fe::DataType_t::FLOAT));
  const auto grads = g->sdpa_backward(q, k, v, tensor(g, kO, "O", s.dims(), s.in_bt()),
                                      tensor(g, kDO, "dO", s.dims(), s.in_bt()), stats, opts);
  for (int i = 0; i < 3; ++i)  // dQ, dK, dV into one (B, T, 3C) tensor, as Q, K, V are read
    grads[i]->set_output(true).set_uid(static_cast<Uid>(kDQ + i)).set_dim(s.dims()).set_stride(s.in_qkv());
  return g;
}

// The heuristic's first config's neighbours after its list: its engine with one knob at each other value it takes
// (knobs of at most 64), where cuDNN accepts the config. A neighbour that does not build says so when asked for.
void add_neighbours(fe::graph::Graph& g) {
  int64_t engine = 0;
  std::unordered_map<fe::KnobType_t, int64_t> first;
  std::vector<fe::Knob> knobs;
  if (g.get_engine_and_knobs_at_index(0, engine, first).is_bad() || g.get_knobs_for_engine(engine, knobs).is_bad())
    return;
  for (const fe::Knob& k : knobs) {
    if (k.stride <= 0 || (k.maxValue - k.minValue) / k.stride >= 64) continue;
    for (int64_t v = k.minValue; v <= k.maxValue; v += k.stride) {
      auto other = first;
      if (other.count(k.type) && other[k.type] == v) continue;
      other[k.type] = v;
      (void)g.create_execution_plan(engine, other);  // a config cuDNN refuses is not listed
    }
  }
}

// A graph with cuDNN's heuristic list (mode A, as ATen's) and its first's neighbours, each plan built when first
// asked for; a name listed twice is the first of them.
struct Planned {
  Graph graph;
  std::vector<std::string> names;   // the list's, in its order
  std::vector<std::string> failed;  // why a plan did not build ("": not tried, or built)
  std::vector<bool> built;
  std::map<std::string, int64_t> index;  // of each name the step has run, so that a step looks up, not searches
};

Planned plan(const Graph& g) {
  check(g->validate(), "graph validation");
  check(g->build_operation_graph(at::native::getCudnnHandle()), "operation graph");
  check(g->create_execution_plans({fe::HeurMode_t::A}), "heuristics");
  check(g->check_support(), "support check");
  add_neighbours(*g);
  Planned p{g, {}, {}, {}, {}};
  for (int64_t i = 0; i < g->get_execution_plan_count(); ++i) {
    std::string name;
    check(g->get_plan_name_at_index(i, name), "plan name");
    p.names.push_back(name);
  }
  p.failed.resize(p.names.size()), p.built.resize(p.names.size());
  return p;
}

bool try_build(Planned& p, size_t i) {
  if (!p.built[i] && p.failed[i].empty()) {
    fe::error_t status = p.graph->build_plan_at_index(static_cast<int64_t>(i));
    p.built[i] = status.is_good();
    if (!p.built[i]) p.failed[i] = status.get_message().empty() ? "did not build" : status.get_message();
  }
  return p.built[i];
}

// The index of the plan named ("": the list's first that builds), built.
int64_t plan_index(Planned& p, const std::string& name, const char* direction) {
  if (const auto known = p.index.find(name); known != p.index.end()) return known->second;
  for (size_t i = 0; i < p.names.size(); ++i) {
    if (name.empty() ? try_build(p, i) : p.names[i] == name) {
      TORCH_CHECK(try_build(p, i), "cudnn_causal_attention: cuDNN's ", direction, " plan ", name,
                  " did not build: ", p.failed[i]);
      return p.index[name] = static_cast<int64_t>(i);
    }
  }
  std::string seen;
  for (size_t i = 0; i < p.names.size(); ++i)
    seen += (i ? ", " : "") + p.names[i] + (p.failed[i].empty() ? "" : " (" + p.failed[i] + ")");
  TORCH_CHECK(false, "cudnn_causal_attention: ",
              name.empty() ? std::string("no plan of cuDNN's ") + direction + " list for these operands builds"
                           : std::string("cuDNN's ") + direction + " list for these operands has no plan " + name,
              " (", seen, ")");
}

// `use` of the graph for these operands, planned once a process for each (shape, dtype, dropout, device,
// direction), with the lock held: a plan is built once.
template <typename Use>
auto with_planned(const Shape& s, at::ScalarType dtype, double p, bool backward, Use use) {
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int, double, int, bool>;
  static std::mutex mutex;
  static std::map<Key, Planned> graphs;
  const Key key{s.B, s.H, s.T, s.D, static_cast<int>(dtype), p, at::cuda::current_device(), backward};
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = graphs.find(key);
  if (it == graphs.end())
    it = graphs.emplace(key, plan(backward ? backward_graph(s, dtype, p) : forward_graph(s, dtype, p))).first;
  return use(it->second);
}

using GraphPlan = std::pair<const fe::graph::Graph*, int64_t>;  // a graph and the index of its plan to run

GraphPlan graph_for(const Shape& s, at::ScalarType dtype, double p, bool backward, const std::string& plan_name) {
  return with_planned(s, dtype, p, backward, [&](Planned& planned) {
    return GraphPlan{planned.graph.get(), plan_index(planned, plan_name, backward ? "backward" : "forward")};
  });
}

// The addresses of the three C-wide parts of each (B, T, 3C) row's tensor: query, key, value (or their gradients).
std::array<char*, 3> thirds(const at::Tensor& t) {
  char* base = static_cast<char*>(t.data_ptr());
  const int64_t third = t.size(2) / 3 * t.element_size();
  return {base, base + third, base + 2 * third};
}

void run(const GraphPlan& plan, std::unordered_map<int64_t, void*>& pack, const at::Tensor& like) {
  const auto& [g, index] = plan;
  cudnnHandle_t handle = at::native::getCudnnHandle();
  TORCH_CHECK(cudnnSetStream(handle, at::cuda::getCurrentCUDAStream()) == CUDNN_STATUS_SUCCESS,
              "cudnn_causal_attention: cudnnSetStream failed");
  int64_t bytes = 0;
  check(g->get_workspace_size_plan_at_index(index, bytes), "workspace size");
  const at::Tensor workspace = at::empty({std::max<int64_t>(bytes, 1)}, like.options().dtype(at::kByte));
  check(g->execute_plan_at_index(handle, pack, workspace.mutable_data_ptr(), index), "execution");
}

struct CudnnAttentionFn : torch::autograd::Function<CudnnAttentionFn> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& qkv, int64_t n_head, double p,
                            const CudnnPlans& plans) {
    const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3;
    const Shape s{B, n_head, T, C / n_head};
    const at::Tensor o = at::empty({B, T, C}, qkv.options());
    const at::Tensor stats = at::empty({B, n_head, T, 1}, qkv.options().dtype(at::kFloat));
    at::Tensor seed, offset;  // the dropout's, where there is one
    const auto [q, k, v] = thirds(qkv);
    std::unordered_map<int64_t, void*> pack = {
        {kQ, q}, {kK, k}, {kV, v}, {kO, o.data_ptr()}, {kStats, stats.data_ptr()}};
    if (p > 0) {
      seed = at::empty({1}, qkv.options().dtype(at::kLong)), offset = at::empty_like(seed);
      auto* gen = at::get_generator_or_default<at::CUDAGeneratorImpl>(std::nullopt,
                                                                      at::cuda::detail::getDefaultCUDAGenerator());
      at::PhiloxCudaState philox;
      {
        const std::lock_guard<std::mutex> lock(gen->mutex_);
        // a number per weight at most, in the multiples of 4 the generator hands out
        philox = gen->philox_cuda_state(static_cast<uint64_t>((B * n_head * T * T + 3) / 4 * 4));
      }
      at::cuda::philox::unpack_cudnn_wrapper(philox, seed.data_ptr<int64_t>(), offset.data_ptr<int64_t>(),
                                             at::cuda::getCurrentCUDAStream());
      pack[kSeed] = seed.data_ptr(), pack[kOffset] = offset.data_ptr();
    }
    run(graph_for(s, qkv.scalar_type(), p, false, plans.forward), pack, qkv);
    ctx->save_for_backward({qkv, o, stats, seed, offset});
    ctx->saved_data["n_head"] = n_head;
    ctx->saved_data["p"] = p;
    ctx->saved_data["backward_plan"] = plans.backward;
    return o;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &qkv = saved[0], &o = saved[1], &stats = saved[2], &seed = saved[3], &offset = saved[4];
    const int64_t n_head = ctx->saved_data["n_head"].toInt();
    const double p = ctx->saved_data["p"].toDouble();
    const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3;
    const at::Tensor d_o = grad[0].contiguous(), d_qkv = at::empty_like(qkv);
    const auto [q, k, v] = thirds(qkv);
    const auto [dq, dk, dv] = thirds(d_qkv);
    std::unordered_map<int64_t, void*> pack = {{kQ, q},   {kK, k},   {kV, v},   {kO, o.data_ptr()},
                                               {kDQ, dq}, {kDK, dk}, {kDV, dv}, {kDO, d_o.data_ptr()},
                                               {kStats, stats.data_ptr()}};
    if (p > 0) pack[kSeed] = seed.data_ptr(), pack[kOffset] = offset.data_ptr();
    run(graph_for({B, n_head, T, C / n_head}, qkv.scalar_type(), p, true,
                  ctx->saved_data["backward_plan"].toStringRef()),
        pack, qkv);
    return {d_qkv, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// What cuDNN's flash attention takes, checked before a graph is built.
void check_operands(const at::Tensor& qkv, int64_t n_head, double p) {
  TORCH_CHECK(qkv.is_cuda() && qkv.is_contiguous() && qkv.dim() == 3 && qkv.size(2) % 3 == 0 && n_head > 0 &&
                  qkv.size(2) / 3 % n_head == 0,
              "cudnn_causal_attention: a contiguous CUDA (B, T, 3C) tensor of n_head heads expected, got ", qkv.sizes());
  TORCH_CHECK(qkv.scalar_type() == at::kBFloat16 || qkv.scalar_type() == at::kHalf,
              "cudnn_causal_attention: bf16 or fp16 expected (cuDNN's flash attention), got ", qkv.scalar_type());
  const int64_t D = qkv.size(2) / 3 / n_head;
  TORCH_CHECK(D % 8 == 0 && D <= 128, "cudnn_causal_attention: head size ", D, " (a multiple of 8 up to 128 expected)");
  TORCH_CHECK(p >= 0 && p < 1, "cudnn_causal_attention: dropout ", p, " is not a probability below 1");
}

}  // namespace

bool cudnn_attention_built() { return true; }

at::Tensor cudnn_causal_attention(const at::Tensor& qkv, int64_t n_head, double p, const CudnnPlans& plans) {
  check_operands(qkv, n_head, p);
  const c10::cuda::CUDAGuard device(qkv.device());
  return CudnnAttentionFn::apply(qkv, n_head, p, plans);
}

std::vector<std::string> cudnn_attention_plans(const at::Tensor& qkv, int64_t n_head, double p, bool backward) {
  check_operands(qkv, n_head, p);
  const c10::cuda::CUDAGuard device(qkv.device());
  const int64_t C = qkv.size(2) / 3;
  const std::vector<std::string> names = with_planned({qkv.size(0), n_head, qkv.size(1), C / n_head},
                                                      qkv.scalar_type(), p, backward,
                                                      [](const Planned& planned) { return planned.names; });
  std::vector<std::string> once;
  for (const std::string& name : names)
    if (std::find(once.begin(), once.end(), name) == once.end()) once.push_back(name);
  return once;
}

}  // namespace gpt2::kernels

#else  // no cuDNN frontend found at configure time

namespace gpt2::kernels {

bool cudnn_attention_built() { return false; }

at::Tensor cudnn_causal_attention(const at::Tensor&, int64_t, double, const CudnnPlans&) {
  TORCH_CHECK(false, "cudnn_causal_attention: this build found no cuDNN frontend (scripts/fetch_cudnn_frontend.sh)");
}

std::vector<std::string> cudnn_attention_plans(const at::Tensor&, int64_t, double, bool) {
  TORCH_CHECK(false, "cudnn_attention_plans: this build found no cuDNN frontend (scripts/fetch_cudnn_frontend.sh)");
}

}  // namespace gpt2::kernels

#endif
