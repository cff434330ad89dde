#include "bench/ladder/reference.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>
#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "bench/ladder/paired.h"
#include "bench/ladder/parity.h"
#include "bench/ladder/results.h"
#include "bench/measure/clocks.h"
#include "bench/measure/profiler.h"
#include "bench/measure/stats.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/format.h"
#include "common/python.h"
#include "config/profile.h"
#include "bench/runtime/device_info.h"

namespace gpt2 {

const std::vector<std::string>& reference_names() {
  static const std::vector<std::string> names = {"ref_torch_eager", "ref_torch_compile"};
  return names;
}

nlohmann::json reference_config(const std::string& name, const Profile& prof, const DeviceInfo& dev, int64_t batch) {
  const bool compiled = name == "ref_torch_compile";
  if (!compiled && name != "ref_torch_eager") throw std::invalid_argument("unknown reference rung '" + name + "'");
  ModelOptions m = prof.model;
  if (compiled) m.vocab_pad_to = prof.settings.vocab_multiple;  // as vocab_padding pads
  // The baseline's AdamW (baseline_spec): its hyper-parameters, and its form for the eager reference.
  OptimizerOptions opt = baseline_spec(prof.model, batch, dev).optimizer;
  opt.lr = prof.lr;
  const std::string eager_optimizer = opt.kind == OptimizerKind::kAdamwForeach ? "foreach" : "loop";
  return {
      {"name", name},
      {"device", dev.cuda() ? "cuda:" + std::to_string(dev.index) : "cpu"},
      {"model", {{"vocab_size", m.vocab_size}, {"padded_vocab", m.padded_vocab()}, {"context", m.context}, {"n_embd", m.n_embd},
                 {"n_head", m.n_head}, {"n_layer", m.n_layer}, {"dropout", m.dropout}, {"qkv_bias", m.qkv_bias},
                 {"tie_weights", m.tie_weights}}},
      {"batch", batch},
      {"seed", prof.seed},
      {"precision", compiled ? "bf16_cast" : "fp32"},
      {"attention", compiled ? "sdpa" : "manual"},
      {"layers", compiled ? "native" : "scratch"},
      {"optimizer", {{"form", compiled ? "fused" : eager_optimizer}, {"lr", opt.lr}, {"weight_decay", opt.weight_decay},
                     {"beta1", opt.beta1}, {"beta2", opt.beta2}, {"eps", opt.eps}}},
      {"compile", compiled},
      // torch.compile both ways a user writes it: the model alone with the loss eager after it (seed 000's code),
      // and the model returning its loss (nanoGPT's forward(idx, targets)), the loss then inside the graph. The
      // faster is the reference's figure: which one is depends on the device.
      {"compile_scopes", compiled ? nlohmann::json{"model", "model_and_loss"} : nlohmann::json::array()},
      {"parity_steps", prof.parity_steps},
      // At batch_scaling's batch the parity only asks whether the step trains (another problem than the baseline's,
      // ParityClass::kProblem): run uncompiled there, not worth a compilation of its own (dropout off is another
      // graph) on a lent GPU's clock. At the profile's batch it is compiled: the compiled step against the baseline.
      {"parity_eager", compiled && batch != prof.batch},
      {"warmup_steps", prof.warmup_steps},
      {"steps", prof.steps},
      {"repetitions", prof.repetitions},
      {"breakdown_steps", prof.breakdown_steps},  // torch.profiler over that many steps: the eager gap's other side
  };
}

namespace {

// The last non-empty line of a log: what a failing script said last (a Python exception's message).
std::string last_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  return last;
}

// Runs argv with stdout and stderr into `log`; returns the exit status as a sentence ("" = exit 0). With `pipes`,
// `beside` runs once the child says it is ready, asking it for repetitions; then the child is told to end.
std::string run_logged(const std::vector<std::string>& args, const std::string& log, PairPipes* pipes = nullptr,
                       const PairedTiming& beside = {}) {
  const pid_t pid = ::fork();
  if (pid < 0) return std::string("fork failed: ") + std::strerror(errno);
  if (pid == 0) {
    if (pipes) pipes->in_child();
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) ::dup2(fd, STDOUT_FILENO), ::dup2(fd, STDERR_FILENO);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "cannot run %s: %s (set GPT2BENCH_PYTHON)\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  int status = 0;
  auto wait_for_it = [&] {
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  };
  if (pipes) {
    pipes->in_parent();
    try {
      if (pipes->ready(pid)) beside([&] { return pipes->repetition(pid); });
    } catch (...) {  // the child told to end and waited for all the same
      pipes->end();
      wait_for_it();
      throw;
    }
    pipes->end();
  }
  wait_for_it();
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "exit code " + std::to_string(WEXITSTATUS(status));
}

}  // namespace

void check_python_runs(const std::string& python) {
  std::string found = python;
  if (python.find('/') == std::string::npos) {  // a bare name: as the shell finds it, on PATH
    found.clear();
    std::istringstream path(std::getenv("PATH") ? std::getenv("PATH") : "");
    for (std::string dir; found.empty() && std::getline(path, dir, ':');)
      if (const auto at = files::join(dir.empty() ? "." : dir, python); ::access(at.c_str(), X_OK) == 0) found = at;
  }
  if (found.empty() || ::access(found.c_str(), X_OK) != 0 || files::is_dir(found))
    throw std::runtime_error("the reference rungs run Python, and '" + python + "' is not an executable (set "
                             "GPT2BENCH_PYTHON to a python3 with torch, unset it for the project's venv, or leave the "
                             "references out with --rung)");
}

bool references_failed(const nlohmann::json& refs) {
  if (!refs.is_array()) return false;
  return std::any_of(refs.begin(), refs.end(), [](const nlohmann::json& r) { return r.value("status", "") == "error"; });
}

nlohmann::json run_reference(const std::string& name, nlohmann::json config, const at::Tensor& train_tokens,
                             const std::string& dir, double budget_s, const PairedTiming& beside) {
  const std::string sub = files::join(dir, "reference");
  files::create_dirs(sub);
  const int64_t B = config["batch"], T = config["model"]["context"];
  // One set of files per run: ref_torch_compile runs at the profile's batch and again at batch_scaling's.
  const std::string base = files::join(sub, name + "_b" + std::to_string(B));
  const std::string out_path = base + ".result.json", log = base + ".log";
  // The tokens its steps read, from the start of the train split (the C++ Loader's order).
  const int64_t steps = int64_t(config["parity_steps"]) + 1 + int64_t(config["warmup_steps"]) +
                        int64_t(config["repetitions"]) * int64_t(config["steps"]) + 2 * config.value("breakdown_steps", int64_t{0});
  const int64_t n = std::min<int64_t>(train_tokens.numel(), steps * B * T + 1);
  const at::Tensor tokens = train_tokens.narrow(0, 0, n).to(at::kLong).contiguous();
  files::write_file_atomic(base + ".tokens", std::string(static_cast<const char*>(tokens.data_ptr()), n * sizeof(int64_t)));
  config["tokens"] = base + ".tokens";
  config["budget_s"] = budget_s < 0 ? nlohmann::json() : nlohmann::json(std::max(0.0, budget_s));  // null: none
  std::unique_ptr<PairPipes> pipes = beside ? std::make_unique<PairPipes>() : nullptr;
  if (pipes) config["pair_fds"] = {pipes->child_fds().first, pipes->child_fds().second};
  files::write_file_atomic(base + ".config.json", config.dump(2) + "\n");
  files::remove_all(out_path);

  const std::string script = std::string(GPT2BENCH_SOURCE_DIR) + "/reference/gpt2bench_ref.py";
  const std::string failed = run_logged({project_python(), script, base + ".config.json", out_path}, log, pipes.get(), beside);
  config.erase("pair_fds");  // this process's file descriptors: nothing to keep
  nlohmann::json entry = {{"name", name}, {"status", "ok"}, {"config", config}, {"log", log}};
  if (failed.empty()) {
    try {
      std::ifstream in(out_path);
      entry["result"] = nlohmann::json::parse(in);
      return entry;
    } catch (const std::exception& e) {
      entry["status"] = "error";
      entry["error"] = "its result " + out_path + " does not parse: " + e.what();
      return entry;
    }
  }
  entry["status"] = "error";
  const std::string said = last_line(log);
  entry["error"] = project_python() + " " + script + ": " + failed + (said.empty() ? "" : ": " + said);
  entry["failure"] = {{"exit", failed}, {"said", said}};  // the same, apart: how it ended, Python's last line
  return entry;
}

std::vector<std::pair<std::string, int64_t>> references_to_run(const std::vector<std::string>& selected, int64_t batch,
                                                               std::optional<int64_t> searched_batch,
                                                               const nlohmann::json& kept) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const auto& n : selected) out.emplace_back(n, batch);
  if (std::find(selected.begin(), selected.end(), "ref_torch_compile") != selected.end() && searched_batch &&
      *searched_batch != batch)
    out.emplace_back("ref_torch_compile", *searched_batch);
  std::erase_if(out, [&](const auto& t) {
    return std::any_of(kept.begin(), kept.end(), [&](const nlohmann::json& r) {
      const int64_t b = r.at("config").value("batch", int64_t{0});
      return r.at("name") == t.first && (t.second == 0 ? b != batch : b == t.second);  // 0: batch_scaling's, unknown
    });
  });
  return out;
}

namespace {

// How far the repetitions' noise alone could move a C++-over-Python ratio, for `cpp` repetitions' tok/s against
// the reference's; null where the reference kept no per-repetition step times.
nlohmann::json ratio_interval_json(const std::vector<double>& cpp, const nlohmann::json& ref) {
  const auto& res = ref["result"];
  if (!res.contains("step_s")) return nullptr;
  const double tokens = ref["config"]["batch"].get<double>() * ref["config"]["model"]["context"].get<double>();
  std::vector<double> python;
  for (const auto& s : res["step_s"]) python.push_back(tokens / s.get<double>());
  const RatioInterval ri = ratio_interval(cpp, python);
  return {{"estimate", ri.estimate}, {"low", ri.low}, {"high", ri.high}, {"level", ri.level},
          {"method", "Hodges-Lehmann: the median of the repetitions' pairwise tok/s ratios, "
                     "with the Mann-Whitney distribution-free interval"}};
}

// The reference's parity: its losses against the baseline's, or at batch_scaling's batch against the baseline's step
// at that batch, else the C++ rung that trains that problem; its parity run's out-of-memory error where it had one.
void judge_reference_parity(nlohmann::json& ref, const std::vector<RungRecord>& rungs, const Trajectory& baseline,
                            const std::map<int64_t, Trajectory>& baseline_at) {
  const auto& res = ref["result"];
  const int64_t batch = ref["config"]["batch"];
  if (res.contains("parity_losses") && !baseline.losses.empty()) {
    Trajectory t{res["parity_losses"].get<std::vector<double>>(), res.value("parity_first_batch_after", NAN),
                 res.value("parity_grad_norm", 0.0)};
    const nlohmann::json norms = res.value("parity_grad_norms", nlohmann::json::object());
    for (const auto& [name, norm] : norms.items()) t.first_grad_norms.emplace_back(name, norm.get<double>());
    const ParityClass cls = ref["name"] == "ref_torch_eager" ? ParityClass::kExact : ParityClass::kPrecision;
    // At batch_scaling's batch the reference trains another problem than the baseline (rungs.front()): judged
    // against the baseline's step at that batch (as the C++ rungs there are), else the C++ rung that trains that
    // problem (same batch, weights and data: the first at that batch, the top), else, with neither, as a rung of
    // another problem is (its first batch's loss must fall).
    const bool same_batch = !rungs.empty() && rungs.front().plan.rung.spec.batch == batch;
    const auto there = baseline_at.find(batch);
    const bool base_there = !same_batch && there != baseline_at.end() && there->second.losses.size() >= t.losses.size();
    const RungRecord* on = nullptr;
    const bool tied = ref["config"]["model"].value("tie_weights", false);
    for (const auto& r : rungs)
      if (!same_batch && !base_there && !on && r.ok() && r.spec().batch == batch && ranks(r.spec()) == 1 &&
          r.spec().model.tie_weights == tied && has_trajectory(r.out.parity))
        on = &r;
    if (same_batch)
      ref["parity"] = to_json(judge_parity(cls, t, baseline), cls);
    else if (base_there)
      ref["parity"] = to_json(judge_parity(cls, t, there->second, baseline_at_batch(batch)), cls);
    else if (on)
      ref["parity"] = to_json(judge_parity(cls, t, trajectory_of(on->out.parity), on->name()), cls);
    else
      ref["parity"] = to_json(judge_parity(ParityClass::kProblem, t, baseline), ParityClass::kProblem);
    if (res.contains("parity_form")) ref["parity"]["form"] = res["parity_form"];  // "eager", or the compiled scope
  } else if (res.contains("parity_error")) {  // its parity run ran out of device memory: no figures, the timing stands
    ref["parity"] = {{"verdict", "n/a"}, {"error", "its parity run: " + res["parity_error"].get<std::string>()}};
  }
}

// The reference's step by kind of work, in the breakdown's categories (bench/measure/profiler.h's one rule): each
// name of its by_name (kernels and copies on a GPU, ATen ops on a CPU) by its name alone. A generic ATen kernel, whose
// name gives its arithmetic and not the op that launched it, is elementwise or other here.
nlohmann::json category_ms(const nlohmann::json& breakdown) {
  const bool ops = breakdown.value("events", "") == "ATen ops";
  nlohmann::json out = nlohmann::json::object();
  for (const auto& e : breakdown["by_name"]) {
    const std::string name = e.value("name", "");
    const std::string kind = ops ? "op" : name == "memcpy" || name == "memset" ? name : "kernel";
    const std::string cat = category(name, kind);
    out[cat] = out.value(cat, 0.0) + e.value("ms_per_step", 0.0);
  }
  return out;
}

}  // namespace

// The C++ rung a reference is compared with: the baseline for ref_torch_eager; else the fastest one-process rung
// at its batch, of the same model and matmul format (bf16: not an fp16 or FP8 step against a bf16 one), not an
// anti-variant nor the top's second timing, whose parity did not fail (a faster one left out is in `passed_over`).
const RungRecord* compared_rung(nlohmann::json& ref, const std::vector<RungRecord>& rungs) {
  const int64_t batch = ref["config"]["batch"];
  const RungRecord* with = nullptr;
  ref.erase("passed_over");
  if (ref["name"] == "ref_torch_eager") {
    for (const auto& r : rungs)
      if (r.plan.kind == RungKind::kBaseline && r.ok()) with = &r;
  } else {
    // The faster of two timings of the top would favour it: its second timing (kControl) is no candidate.
    const bool tied = ref["config"]["model"]["tie_weights"];
    StepSpec as_run;
    as_run.precision = precision_from(ref["config"]["precision"]);
    const std::string format = matmul_format(as_run);
    std::vector<std::pair<const RungRecord*, std::string>> left_out;  // and why
    for (const auto& r : rungs) {
      if (!r.ok() || r.spec().batch != batch || ranks(r.spec()) != 1 || r.plan.rung.anti ||
          r.plan.kind == RungKind::kControl || r.spec().model.tie_weights != tied)
        continue;
      const std::string its = matmul_format(r.spec());
      if (r.out.parity.verdict == "fail")
        left_out.emplace_back(&r, "failed parity");
      else if (its != format)
        left_out.emplace_back(&r, its + " matmuls, the reference's " + format);
      else if (!with || r.median_tokens_per_sec() > with->median_tokens_per_sec())
        with = &r;
    }
    // Said beside the ratio: the faster rungs it is not held against, and why.
    for (const auto& [r, why] : left_out)
      if (!with || r->median_tokens_per_sec() > with->median_tokens_per_sec())
        ref["passed_over"].push_back({{"rung", r->name()}, {"cpp_tokens_per_sec", r->median_tokens_per_sec()},
                                      {"why", why}});
  }
  return with;
}

void compare_reference(nlohmann::json& ref, const std::vector<RungRecord>& rungs, const Trajectory& baseline,
                       const std::map<int64_t, Trajectory>& baseline_at) {
  if (ref["status"] != "ok") return;
  const auto& res = ref["result"];
  const RungRecord* with = compared_rung(ref, rungs);
  if (with) {
    ref["compared_with"] = with->name();
    ref["cpp_parameters"] = parameter_count(with->spec().model);
    ref["cpp_tokens_per_sec"] = with->median_tokens_per_sec();
    ref["ratio"] = with->median_tokens_per_sec() / res["tokens_per_sec"].get<double>();  // C++ over Python
    if (auto ri = ratio_interval_json(with->out.timing.rep_tokens_per_sec, ref); !ri.is_null())
      ref["ratio_interval"] = ri;  // how far the repetitions' noise alone could move it
    const auto& b = with->out.breakdown.summary;
    if (res.contains("breakdown") && b.is_object()) {
      const auto& py = res["breakdown"];
      if (py.contains("events_per_step") && b.contains("events_per_step"))  // the eager gap in one figure
        ref["events_per_step"] = {{"what", py["events"]}, {"cpp", b["events_per_step"]},
                                  {"python", py["events_per_step"]}};
      // Kind by kind; not for a compiled step's ATen ops (a CPU's): its time is in inductor's regions, not in ops.
      const bool opaque = py.value("events", "") == "ATen ops" && ref["config"].value("compile", false);
      if (py.contains("by_name") && b.contains("category_ms") && !opaque)
        ref["category_ms"] = {{"cpp", b["category_ms"]}, {"python", category_ms(py)}};
    }
  }
  judge_reference_parity(ref, rungs, baseline, baseline_at);
}

namespace {
// Paired timing's figures into `a` (ref["again"]) and the reference's ratio: pair i is the C++ rung's repetition i and
// the script's, one run right after the other; a drift slower than a pair moves both alike and leaves its ratio.
void take_pairs(nlohmann::json& ref, nlohmann::json& a, const RungRecord& again, const std::vector<double>& python_step_s) {
  const auto& cpp_ms = again.out.timing.rep_step_ms;
  std::vector<double> ratios;  // C++ tok/s over Python's: Python's seconds a step over C++'s
  for (size_t i = 0; i < std::min(cpp_ms.size(), python_step_s.size()); ++i)
    ratios.push_back(python_step_s[i] / (cpp_ms[i] / 1e3));
  if (ratios.empty()) return;
  const MedianInterval mi = median_interval(ratios);
  const double tokens = ref["config"]["batch"].get<double>() * ref["config"]["model"]["context"].get<double>();
  a["ratio"] = mi.median;
  a["ratio_interval"] = {{"estimate", mi.median}, {"low", mi.low}, {"high", mi.high}, {"level", mi.level},
                         {"method", "paired: the median of the pairs' ratios (a C++ repetition and a Python one, "
                                    "alternately first), with the sign test's order-statistic interval"}};
  a["paired"] = {{"python_step_s", python_step_s}, {"ratios", ratios},
                 {"python_tokens_per_sec", tokens / median(python_step_s)},
                 {"python_steps_per_repetition", ref["result"].value("paired", nlohmann::json::object()).value("steps_per_repetition", 0)}};
  ref["first_timing"] = {{"cpp_tokens_per_sec", ref["cpp_tokens_per_sec"]}, {"ratio", ref["ratio"]}};
  if (ref.contains("ratio_interval")) ref["first_timing"]["ratio_interval"] = ref["ratio_interval"];
  ref["ratio"] = a["ratio"], ref["ratio_interval"] = a["ratio_interval"];
  ref["cpp_tokens_per_sec"] = a["cpp_tokens_per_sec"];
  ref["python_tokens_per_sec"] = a["paired"]["python_tokens_per_sec"];
}
}  // namespace

void compare_again(nlohmann::json& ref, const RungRecord& again, const std::vector<double>& python_step_s) {
  nlohmann::json a = {{"rung", again.name()}};
  if (again.out.clocks) a["clocks"] = to_json(*again.out.clocks);
  if (again.out.timing.rep_tokens_per_sec.empty() || again.out.status == RungStatus::kInterrupted ||
      again.out.status == RungStatus::kDiverged) {
    a["error"] = again.out.status == RungStatus::kDiverged ? "non-finite loss at step " + std::to_string(again.out.timing.diverged_at)
                                                           : std::string("not finished: interrupted");
    ref["again"] = a;
    return;
  }
  a["cpp_tokens_per_sec"] = again.median_tokens_per_sec();
  a["ratio"] = again.median_tokens_per_sec() / ref["result"]["tokens_per_sec"].get<double>();
  if (auto ri = ratio_interval_json(again.out.timing.rep_tokens_per_sec, ref); !ri.is_null()) a["ratio_interval"] = ri;
  a["repetitions"] = {{"tokens_per_sec", again.out.timing.rep_tokens_per_sec}, {"step_ms", again.out.timing.rep_step_ms}};
  a["steps_per_repetition"] = again.out.timing.steps;
  a["batch"] = again.spec().batch;
  if (!python_step_s.empty() && ref.contains("ratio")) take_pairs(ref, a, again, python_step_s);
  ref["again"] = a;
}

namespace {
// " (1.02-1.07x, 97%)": the ratio's interval where `j` has one.
std::string interval_words(const nlohmann::json& j) {
  if (!j.contains("ratio_interval")) return "";
  const auto& ri = j["ratio_interval"];
  const bool paired = ri.value("method", "").starts_with("paired");
  return strf(" (%.2f-%.2fx, %.0f%%%s)", ri["low"].get<double>(), ri["high"].get<double>(), 100 * ri["level"].get<double>(),
              paired ? ", paired" : "");
}
}  // namespace

std::string again_line(const nlohmann::json& ref) {
  if (!ref.contains("again")) return "";
  const auto& a = ref["again"];
  std::string s = "    " + a["rung"].get<std::string>() + " timed again " + (a.contains("paired") ? "beside " : "after ") +
                  ref["name"].get<std::string>() + ": ";
  if (a.contains("error")) return s + first_line(a["error"].get<std::string>());
  if (a.contains("paired") && ref.contains("first_timing"))  // its ratio is the reference's: the other timing's
    return s + strf("%.0f tok/s; its first timing (the ladder's) %.2fx it", a["cpp_tokens_per_sec"].get<double>(),
                    ref["first_timing"]["ratio"].get<double>()) + interval_words(ref["first_timing"]);
  return s + strf("%.0f tok/s, %.2fx it", a["cpp_tokens_per_sec"].get<double>(), a["ratio"].get<double>()) +
         interval_words(a);
}

void attach_reference_clocks(nlohmann::json& ref, const ClockSamples& samples) {
  if (!ref.contains("result")) return;
  const auto& res = ref["result"];
  auto over_window = [&](const nlohmann::json& r) {
    const auto w = r.value("timed_window_s", nlohmann::json());
    if (!w.is_array() || w.size() != 2)
      return to_json(unavailable_clocks(samples.unavailable_why.empty() ? "the reference recorded no timed window"
                                                                        : samples.unavailable_why));
    return to_json(clocks_within(samples, w[0].get<double>(), w[1].get<double>()));
  };
  ref["clocks"] = over_window(res);
  const nlohmann::json scopes = res.value("compile_scopes", nlohmann::json::object());
  for (const auto& [scope, v] : scopes.items())
    if (!v.contains("error")) ref["compile_scope_clocks"][scope] = over_window(v);
}

namespace {

// "1980 MHz", with the power cap's share of the samples and a throttle's reason where there are; "" unavailable.
std::string clock_words(const nlohmann::json& c) {
  if (!c.value("available", false)) return "";
  std::string s = strf("%.0f MHz", c.value("sm_mhz_median", 0.0));
  if (c.value("power_capped_share", 0.0) > 0) s += strf(" (power-capped %.0f%%)", 100 * c.value("power_capped_share", 0.0));
  if (c.value("throttled", false)) s += " THROTTLED: " + c.value("throttled_why", std::string());
  return s;
}

// A reference's lines under its first: why its parity has no verdict, events a step, the SM clock, the faster rungs
// it was not compared with.
std::string detail_lines(const nlohmann::json& ref) {
  std::string s;
  if (ref.contains("parity") && ref["parity"].contains("error")) {  // why it has no verdict, on a line of its own
    s += "\n      parity: " + clip(ref["parity"]["error"].get<std::string>(), 150);
  }
  if (ref.contains("events_per_step")) {  // a line of its own: beside the ratio it took the line past 160 characters
    const auto& e = ref["events_per_step"];
    s += strf("\n      %s a step: C++ %.0f, Python %.0f", e["what"].get<std::string>().c_str(), e["cpp"].get<double>(),
              e["python"].get<double>());
  }
  // The SM clock over its timed steps (each compiled form's), a line of its own where NVML sampled it.
  std::string clocks;
  if (ref.contains("compile_scope_clocks")) {
    for (const auto& [scope, c] : ref["compile_scope_clocks"].items())
      if (const std::string w = clock_words(c); !w.empty()) clocks += (clocks.empty() ? "" : ", ") + scope + " " + w;
  } else if (ref.contains("clocks")) {
    clocks = clock_words(ref["clocks"]);
  }
  if (!clocks.empty()) s += "\n      SM clock over its timed steps (median): " + clocks;
  for (const auto& p : ref.value("passed_over", nlohmann::json::array()))
    s += strf("\n      not compared with %s (%.0f tok/s): %s", p["rung"].get<std::string>().c_str(),
              p["cpp_tokens_per_sec"].get<double>(), p["why"].get<std::string>().c_str());
  return s;
}

}  // namespace

std::string reference_line(const nlohmann::json& ref) {
  std::ostringstream o;
  o << "    " << ref["name"].get<std::string>() << " ";
  if (ref["status"] != "ok") {
    // How it ended and Python's last line, not the interpreter's and the script's paths before them: the line is
    // cut at 140 characters, and an out-of-memory error says what was asked for and what was free at its start
    // (the allocator's advice at its end). An entry without them (not a failed process): its error as it is.
    std::string e = ref.value("error", "");
    if (ref.contains("failure")) {
      const auto& f = ref["failure"];
      const std::string said = f.value("said", "");
      e = f.value("exit", "") + (said.empty() ? "" : ": " + said);
    }
    o << (ref["status"] == "error" ? "error: " : "") << clip(e, 140);
    return o.str();
  }
  const auto& res = ref["result"];
  // paired: the script's tok/s over its paired repetitions, those its ratio is of
  o << strf("ok: %.0f tok/s (Python, torch %s%s%s)", ref.value("python_tokens_per_sec", res["tokens_per_sec"].get<double>()),
            res.value("torch_version", "?").c_str(), res.contains("compile_scope") ? ", compiled: " : "",
            res.value("compile_scope", "").c_str());
  if (ref.contains("ratio"))
    o << strf("; %s is %.2fx it", ref["compared_with"].get<std::string>().c_str(), ref["ratio"].get<double>())
      << interval_words(ref);
  if (ref.contains("parity")) o << ", parity " << ref["parity"]["verdict"].get<std::string>();
  return clip(o.str(), 160) + detail_lines(ref);
}

}  // namespace gpt2
