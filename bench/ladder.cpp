#include "bench/ladder.h"

#include <benchmark/benchmark.h>
#include <torch/version.h>

#include <ATen/ATen.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>

#include "bench/device.h"
#include "bench/memory.h"
#include "bench/nvtx.h"
#include "bench/parity.h"
#include "bench/profile.h"
#include "bench/results.h"
#include "bench/train_step.h"

namespace gpt2 {
namespace fs = std::filesystem;

namespace {

std::string torch_version() { return TORCH_VERSION; }

// The source tree's commit at run time ("-dirty" with uncommitted changes); the configure-time
// sha where the tree is not a git checkout any more.
std::string git_sha() {
  auto run = [](const std::string& cmd) {
    std::string out;
    if (FILE* p = popen(cmd.c_str(), "r")) {
      char buf[128];
      while (fgets(buf, sizeof(buf), p)) out += buf;
      if (pclose(p) != 0) return std::string();
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
  };
  const std::string dir = GPT2BENCH_SOURCE_DIR;
  std::string sha = run("git -C '" + dir + "' rev-parse --short=12 HEAD 2>/dev/null");
  if (sha.empty()) return GPT2BENCH_GIT_SHA;
  if (!run("git -C '" + dir + "' status --porcelain --untracked-files=no 2>/dev/null").empty()) sha += "-dirty";
  return sha;
}

// batch_scaling: the largest power-of-two batch that fits, trying upwards from the profile's (as a
// power of two) to settings.max_batch. On CUDA "fits" means no out-of-memory error over two steps;
// on the CPU, peak tensor bytes within settings.cpu_memory_budget. Each try is recorded.
int64_t find_batch(const StepSpec& spec, const DeviceInfo& dev, const at::Tensor& tokens, uint64_t seed,
                   MemoryMeter& meter, nlohmann::json& trace) {
  int64_t b = 1, best = 0;
  while (b * 2 <= spec.batch) b *= 2;
  for (; b <= spec.settings.max_batch; b *= 2) {
    StepSpec s = spec;
    s.batch = b;
    s.search_batch = false;
    empty_cache(dev);
    meter.reset_peak();
    try {
      TrainStep ts(s, dev, tokens, seed);
      ts.step();
      ts.step();
      synchronize(dev);
    } catch (const c10::OutOfMemoryError& e) {
      trace.push_back({{"batch", b}, {"fits", false}, {"why", "out of memory"}});
      break;
    }
    const int64_t peak = meter.read().peak_allocated;
    const bool fits = dev.cuda() || peak <= spec.settings.cpu_memory_budget;
    trace.push_back({{"batch", b}, {"fits", fits}, {"peak_alloc_bytes", peak}});
    if (!fits) break;
    best = b;
  }
  empty_cache(dev);
  if (best == 0) throw std::runtime_error("batch_scaling: no batch from " + std::to_string(spec.batch) + " up fits");
  return best;
}

}  // namespace

int run_ladder(const LadderOptions& o) {
  // 1. Everything that can fail on bad input, before DIR is touched.
  Profile prof = load_profile(o.profile_path);
  const DeviceInfo dev = detect_device(o.device.empty() ? prof.device : o.device);
  StepSpec base = baseline_spec(prof.model, prof.batch, dev);
  base.settings = prof.settings;
  std::vector<RungRecord> records;
  for (const auto& plan : expand_plan(prof)) {
    RungRecord r;
    r.rung = resolve(plan.name, plan.variants, base, dev);
    r.benchmark_name = prof.model.preset + "/" + plan.name;
    r.tokens_per_step = r.rung.spec.batch * r.rung.spec.model.context * r.rung.spec.dist.world_size;
    r.flops_per_token = flops_per_token(r.rung.spec.model);
    r.datasheet_peak = datasheet_peak_flops(dev, math_mode(r.rung.spec));
    records.push_back(std::move(r));
  }
  const TokenData data = load_token_data(prof.data, prof.model.vocab_size, prof.seed);

  if (fs::exists(fs::path(o.out_dir) / "results.json"))
    throw std::runtime_error(o.out_dir + " already holds results.json; choose another --out");
  fs::create_directories(o.out_dir);
  auto meter = make_memory_meter(dev);

  std::cerr << "gpt2bench: " << records.size() << " rung(s) of profile '" << prof.name << "' on " << dev.name
            << " (" << (dev.cuda() ? "cuda" : "cpu") << ", torch " << torch_version() << ")\n";

  // 2. The peak the MFU is taken against: measured once per precision used in this run.
  std::map<MathMode, double> measured;
  for (auto& r : records) {
    const MathMode m = math_mode(r.rung.spec);
    if (!measured.count(m)) {
      std::cerr << "gpt2bench: measuring the " << to_string(m) << " matmul peak...\n";
      measured[m] = measure_matmul_peak(dev, m);
    }
    r.measured_peak = measured[m];
  }

  nlohmann::json rungs_doc = {{"profile", {{"name", prof.name}, {"path", prof.path}, {"plan", prof.plan},
                                           {"batch", prof.batch}, {"warmup_steps", prof.warmup_steps},
                                           {"steps", prof.steps}, {"repetitions", prof.repetitions},
                                           {"parity_steps", prof.parity_steps}, {"seed", prof.seed},
                                           {"data", prof.data.synthetic ? "synthetic" : prof.data.train_glob}}},
                              {"device", dev},
                              {"build", {{"torch", torch_version()}, {"cuda", build_has_cuda()},
                                         {"git_sha", git_sha()}}}};
  const std::string results_path = (fs::path(o.out_dir) / "results.json").string();
  const std::string rungs_path = (fs::path(o.out_dir) / "rungs.json").string();
  std::unique_ptr<TeeReporter> reporter;
  auto flush = [&](const std::string& status) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& r : records) list.push_back(to_json(r));
    rungs_doc["rungs"] = list;
    rungs_doc["status"] = status;
    write_file_atomic(rungs_path, rungs_doc.dump(2) + "\n");
    if (reporter) write_file_atomic(results_path, reporter->json_so_far());
  };

  // 3. The parity reference: the baseline's losses over K steps from the seed's weights and data.
  std::vector<double> baseline_losses;
  if (prof.parity_steps > 0) {
    std::cerr << "gpt2bench: parity reference, " << prof.parity_steps << " baseline steps...\n";
    baseline_losses =
        loss_trajectory(records[0].rung.spec, dev, data.train, prof.seed, static_cast<int>(prof.parity_steps)).losses;
  }

  // 4. One Google Benchmark per rung, timed by the device timer (manual time).
  benchmark::AddCustomContext("device", dev.name);
  benchmark::AddCustomContext("device_type", dev.cuda() ? "cuda" : "cpu");
  benchmark::AddCustomContext("torch_version", torch_version());
  benchmark::AddCustomContext("git_sha", rungs_doc["build"]["git_sha"].get<std::string>());
  benchmark::AddCustomContext("profile", prof.name);
  benchmark::AddCustomContext("world_size", "1");
  const size_t n_rungs = records.size();
  std::unique_ptr<TrainStep> live;  // the rung being timed; kept across its repetitions
  for (size_t i = 0; i < n_rungs; ++i) {
    RungRecord* rec = &records[i];
    // A rung whose variants are all skipped here is the previous rung again: say so, time nothing.
    if (i > 0 && rec->rung.spec == records[i - 1].rung.spec && !rec->rung.skipped.empty()) {
      rec->status = "skipped";
      rec->error = "the same step as " + records[i - 1].rung.name + " here (" + rec->rung.skipped.back().variant +
                   ": " + rec->rung.skipped.back().reason + ")";
      continue;
    }
    auto fn = [rec, i, n_rungs, &dev, &data, &prof, &meter, &baseline_losses, &ts = live](benchmark::State& st) {
      const int64_t rep = static_cast<int64_t>(rec->rep_step_ms.size());
      NvtxRange rung_range(rec->benchmark_name.c_str());  // nsys shows the ladder's structure
      try {
        if (rep == 0) {
          std::cerr << "[" << i + 1 << "/" << n_rungs << "] " << rec->rung.name << ": build + " << prof.warmup_steps
                    << " warm-up steps\n";
          ts.reset();
          if (rec->rung.spec.search_batch) {
            rec->rung.spec.batch = find_batch(rec->rung.spec, dev, data.train, prof.seed, *meter, rec->batch_search);
            rec->rung.spec.search_batch = false;
            rec->tokens_per_step = rec->rung.spec.batch * rec->rung.spec.model.context * rec->rung.spec.dist.world_size;
            std::cerr << "    batch_scaling chose batch " << rec->rung.spec.batch << "\n";
          }
          empty_cache(dev);
          meter->reset_peak();
          ts = std::make_unique<TrainStep>(rec->rung.spec, dev, data.train, prof.seed);
          rec->sdpa_backend_used = ts->sdpa_backend_used();
          for (int64_t w = 0; w < prof.warmup_steps; ++w) ts->step();
          synchronize(dev);
        }
        auto timer = make_timer(dev);
        at::Tensor loss;
        double total = 0;
        for (auto _ : st) {
          timer->start();
          loss = ts->step();
          timer->stop();
          const double s = timer->seconds();
          st.SetIterationTime(s);
          total += s;
        }
        const double step_s = total / static_cast<double>(st.iterations());
        const MemoryStats mem = meter->read();
        rec->rep_step_ms.push_back(1e3 * step_s);
        rec->rep_tokens_per_sec.push_back(static_cast<double>(rec->tokens_per_step) / step_s);
        rec->peak_alloc_bytes = mem.peak_allocated;
        rec->peak_reserved_bytes = mem.peak_reserved;
        rec->final_loss = loss.item<double>();  // read after timing
        const double tps = rec->rep_tokens_per_sec.back();
        st.counters["tokens_per_sec"] = tps;
        st.counters["step_ms"] = 1e3 * step_s;
        st.counters["peak_alloc_bytes"] = static_cast<double>(mem.peak_allocated);
        st.counters["peak_reserved_bytes"] = static_cast<double>(mem.peak_reserved);
        st.counters["loss"] = rec->final_loss;
        st.counters["flops_per_token"] = rec->flops_per_token;
        st.counters["mfu"] = rec->flops_per_token * tps / rec->peak_flops();
        if (rep + 1 == prof.repetitions) {
          ts.reset();
          rec->status = "ok";
          if (i > 0 && !baseline_losses.empty()) {
            const Trajectory t =
                loss_trajectory(rec->rung.spec, dev, data.train, prof.seed, static_cast<int>(baseline_losses.size()));
            rec->parity = judge_parity(rec->rung.parity, t, baseline_losses);
          } else {
            rec->parity.rule = i == 0 ? "the reference" : "no parity steps";
            rec->parity.losses = baseline_losses;
          }
        }
      } catch (const c10::Error& e) {
        ts.reset();
        rec->status = "error";
        rec->error = e.what_without_backtrace();
        st.SkipWithError(rec->error.c_str());
      } catch (const std::exception& e) {
        ts.reset();
        rec->status = "error";
        rec->error = e.what();
        st.SkipWithError(rec->error.c_str());
      }
    };
    benchmark::RegisterBenchmark(rec->benchmark_name.c_str(), fn)
        ->UseManualTime()
        ->Iterations(prof.steps)
        ->Repetitions(static_cast<int>(prof.repetitions))
        ->Unit(benchmark::kMillisecond);
  }
  reporter = std::make_unique<TeeReporter>([&](const std::string&) { flush("running"); });

  std::vector<std::string> args = {"gpt2bench", "--benchmark_counters_tabular=true",
                                   isatty(STDOUT_FILENO) ? "--benchmark_color=auto" : "--benchmark_color=false"};
  if (!o.rung_filter.empty()) args.push_back("--benchmark_filter=" + o.rung_filter);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  int argc = static_cast<int>(argv.size());
  benchmark::Initialize(&argc, argv.data());
  benchmark::RunSpecifiedBenchmarks(reporter.get());
  benchmark::ClearRegisteredBenchmarks();
  // Rungs the filter left out stay "pending" in rungs.json and out of the summary.
  std::vector<RungRecord> ran;
  for (const auto& r : records)
    if (r.status != "pending") ran.push_back(r);
  flush("complete");
  benchmark::Shutdown();

  std::cout << "\n" << summary_table(ran, dev.cuda()) << "\nresults: " << results_path << "\n         " << rungs_path
            << "\n";
  bool parity_failed = false, errored = false;
  for (const auto& r : ran) {
    parity_failed = parity_failed || r.parity.verdict == "fail";
    errored = errored || r.status == "error";
  }
  if (parity_failed) std::cout << "\n!! PARITY FAILED on at least one rung: see the parity column and rungs.json\n";
  return errored ? 1 : 0;
}

}  // namespace gpt2
