#include "bench/commands/ddp_check.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <vector>

#include "bench/runtime/dist.h"
#include "bench/step/train_step.h"
#include "common/files.h"
#include "config/profile.h"
#include "model/data.h"

namespace gpt2 {
namespace {

int env_or(const char* name, int def) {
  const char* v = std::getenv(name);
  return v && *v ? std::stoi(v) : def;
}

// Each step's loss averaged over the ranks (the loss a single process with the whole batch sees).
std::vector<double> mean_over_ranks(Dist* dist, const std::vector<double>& losses) {
  if (!dist) return losses;
  const auto all = dist->allgather(losses);
  const size_t steps = losses.size();
  std::vector<double> mean(steps, 0.0);
  for (size_t i = 0; i < steps; ++i) {
    for (int r = 0; r < dist->world_size(); ++r) mean[i] += all[r * steps + i];
    mean[i] /= dist->world_size();
  }
  return mean;
}

}  // namespace

int run_ddp_check(const DdpCheckOptions& o) {
  Profile prof = load_profile(o.profile_path);
  const auto env = dist_env_from_environment();
  const DeviceInfo dev = rank_device(o.device.empty() ? prof.device : o.device, !o.device.empty(), env);
  std::unique_ptr<Dist> dist;
  if (env && env->world_size > 1) dist = std::make_unique<Dist>(*env, dev, std::chrono::seconds(prof.dist_timeout_s));
  StepSpec spec = baseline_spec(prof.model, o.batch.value_or(prof.batch), dev);
  spec.model.dropout = 0.0;
  if (dist) spec.dist.backend = "c10d";
  const TokenData data = load_token_data(prof.data, prof.model.vocab_size, prof.seed);
  const int rank = dist ? dist->rank() : 0;
  const int fault_rank = env_or("GPT2BENCH_FAULT_RANK", -1), fault_step = env_or("GPT2BENCH_FAULT_STEP", -1);

  TrainStep ts(spec, dev, data.train, prof.seed, dist.get());
  std::vector<double> losses;
  auto train = [&] {
    for (int i = 0; i < o.steps; ++i) {
      if (rank == fault_rank && i == fault_step) std::raise(SIGKILL);
      losses.push_back(ts.step().item<double>());
    }
  };
  dist ? dist->guarded(train) : train();
  const std::vector<double> mean = mean_over_ranks(dist.get(), losses);
  double sum = 0, sum_sq = 0;
  for (const auto& p : ts.model().parameters()) {
    const auto d = p.detach().to(at::kDouble);
    sum += d.sum().item<double>();
    sum_sq += d.pow(2).sum().item<double>();
  }
  files::create_dirs(o.out_dir);
  const nlohmann::json j = {{"rank", rank}, {"world_size", dist ? dist->world_size() : 1}, {"batch", spec.batch},
                            {"losses", losses}, {"mean_losses", mean}, {"param_sum", sum}, {"param_sum_sq", sum_sq}};
  std::ofstream(files::join(o.out_dir, "rank" + std::to_string(rank) + ".json")) << j.dump(2) << "\n";
  if (dist) dist->barrier();
  std::cout << "rank " << rank << ": " << o.steps << " steps, mean losses written to " << o.out_dir << "\n";
  return 0;
}

}  // namespace gpt2
