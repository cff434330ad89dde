#include "bench/cli.h"

#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "bench/commands/breakdown.h"
#include "bench/commands/ddp_check.h"
#include "bench/commands/doctor.h"
#include "bench/commands/kernel_bench.h"
#include "bench/ladder/ladder.h"
#include "bench/ladder/reference.h"
#include "bench/ladder/run_dir.h"
#include "bench/runtime/device.h"
#include "bench/runtime/launcher.h"
#include "bench/runtime/memory.h"
#include "common/python.h"
#include "config/profile.h"
#include "model/data.h"
#include "variants/registry.h"

namespace gpt2 {
namespace {

constexpr const char* kMainHelp = R"(gpt2bench: which GPT-2 training-speed optimizations matter, by how much, on this device

usage: gpt2bench <command> [options]

commands:
  ladder         run a profile's rungs under Google Benchmark; write DIR/results.json and DIR/rungs.json
  prepare        turn a text file into llm.c token shards (byte-level, or GPT-2 BPE)
  list-variants  print every variant: what it does, its published rung, support on this device
  doctor         print what this build and this device support
  report         tables and charts (Markdown, HTML, PNG/SVG) from one or more run directories
  breakdown      the breakdown pass alone: where each rung's time, FLOPs and memory go
  kernels        our fused kernels against the ops they replace, forward + backward, timed in turns
  reference-config  the JSON configuration a Python reference rung runs with (--warm fills torch.compile's caches from it)
  ddp-check      train K data-parallel steps; each rank writes its losses and a parameter checksum
  help           this text; `gpt2bench <command> --help` for a command's options

ladder and ddp-check take --nproc N: run N processes on this machine (torchrun's environment);
under torchrun --no-python they join the group torchrun set up instead.
)";

constexpr const char* kLadderHelp = R"(usage: gpt2bench ladder --profile FILE --out DIR [--device D] [--rung REGEX] [--nproc N] [--verbose]
       gpt2bench ladder --resume DIR [--profile FILE]

Runs the rungs of FILE's plan (rung 0 = baseline) under Google Benchmark, timed by the device's timer (CUDA events
or the steady clock) without the warm-up steps, and checks each rung's losses and first gradient against the
baseline's (parity). The default plan ends with the kept rungs: the top with every extra that beat it in this run,
and at the profile's batch the same, then with the extras that tied the top too. Each rung prints where its time
went ("took": choices, search, build, timed, breakdown, parity; rungs.json's ran.seconds).

  --profile FILE   YAML run profile (see profiles/)
  --out DIR        a directory not holding results.json yet. Writes DIR/results.json (Google Benchmark's JSON:
                   tokens_per_sec, step_ms, memory, loss, mfu per repetition) and DIR/rungs.json (per rung: the
                   variants, settings, peaks, parity, medians, choices; the reference rungs and their ratios)
  --device D       auto | cpu | cuda | cuda:N (default: the profile's, else auto)
  --rung REGEX     only the rungs whose name (05_bf16_cast) or benchmark name it finds (POSIX extended, at most
                   1,000 characters; a leading '-' negates it); one that matches no rung is refused
  --verbose        also print Google Benchmark's console table (by default one line a rung, then a summary)
  --resume DIR     finish an interrupted run: its finished rungs are kept, the rest run; refused if the profile
                   resolves differently or the build or device differs. One process a DIR (DIR/.lock).
  --nproc N        N local processes: the ddp rungs run data-parallel on all of them, the rest on rank 0

Ctrl-C or SIGTERM stops cleanly, keeping the finished rungs. Exit status: 0 no rung ended in an error; 1 a rung's
error or a lost rank; 3 a rung left the device unusable or hung (GPT2BENCH_HANG_S, 120 s on CUDA; 0 no watch):
--resume DIR runs the rest in a new process; 130 stopped by a signal (docs/reliability.md).
GPT2BENCH_FAULT_DEVICE=<rung>[:free|:device|:hang] (tests) makes that rung fail so.
Each rung is timed beside the rung it is measured against, repetitions alternating (docs/measurement.md: Pairs).
GPT2BENCH_FAULT_SLOW=<rung>:<seconds>[:<factor>] (tests) slows every step for a window from that rung's timing.
)";

constexpr const char* kDdpCheckHelp = R"(usage: gpt2bench ddp-check --profile FILE --out DIR [--steps K] [--batch B] [--nproc N]

Trains K steps (default 5) of the profile's baseline from the seed's weights, dropout off,
data-parallel when there are several processes, and writes DIR/rank<R>.json per rank: the rank's
losses, the mean loss over ranks per step, and checksums of the parameters after the steps.
Equal checksums on every rank mean DDP kept the replicas identical; N ranks × batch B should give
the mean losses of 1 rank × batch N·B. Fault injection for tests: GPT2BENCH_FAULT_RANK=R and
GPT2BENCH_FAULT_STEP=S make rank R kill itself (SIGKILL) before step S.
)";

constexpr const char* kKernelsHelp = R"(usage: gpt2bench kernels --profile FILE [--out FILE.json] [--device D] [--rounds N]
                        [--only REGEX]

Times each of our fused ops (kernels/) against what the step runs in its place, forward + backward on the same
inputs, at the profile model's shapes in the dtype of the ladder's top rung. On a GPU each side's pass is
captured as a CUDA graph and replayed, so the host's launches stay out of the time (a side that cannot be
captured runs eagerly and says why). The sides take turns for N rounds, each about 5 ms of passes after two
warm-up passes; prints each side's median and "ours Nx" (the other side's median over ours, > 1: ours is
faster) with its Hodges-Lehmann interval. The classifier also runs at 2x, 4x ... the profile's
classifier_chunk, and the fastest is named; on a GPU the residual norm also runs with each row held in registers,
both ways and in the forward alone (settings.residual_norm: held, held_forward) where its width allows, and our
cuDNN attention runs against SDPA's cuDNN and flash kernels and SDPA's cuDNN without dropout (what dropout costs);
the MLP in FP8 runs where FP8 does (sm89+), else it is
skipped, with why; on a GPU one AdamW step over the top's parameters, ours in one launch against ATen's
fused AdamW (else skipped, with why); on a GPU our bias-GELU backward, softmax cross-entropy and classifier
backward kernels alone at each of their launch shapes, with each side's GB/s against a copy of as many bytes. On a GPU it then times
each of the top rung's matmuls with ATen's at::mm against every algorithm cuBLASLt's heuristic offers for its
shape (TFLOP/s, configuration, difference from ATen's output).
On a CPU our ops run their ATen references: the figures say nothing of a GPU. A failing case is recorded, the
others run, and the exit status is 1 (tests: GPT2BENCH_FAULT_KERNEL=<variant> fails one, <variant>:term stops there).

  --profile FILE   YAML run profile (model, batch, seed, device)
  --out FILE       also write the timings as JSON, again after each case ("complete": true once all ran); as
                   RUN/kernels.json the report shows them beside that run
  --device D       auto | cpu | cuda | cuda:N (default: the profile's, else auto)
  --rounds N       rounds of turns (default 15)
  --only REGEX     only the cases with a name it finds (POSIX extended): a variant (fused_residual_norm ...), a
                   kernel timed alone (bias_gelu_backward, softmax_xent_backward_, scaled_gradient, quantize_fp8), the
                   matmul surveys (gemms, fp8_gemms); kernels.json says "only" (Nsight Compute: gpu_session.sh ncu)
)";

constexpr const char* kReferenceConfigHelp = R"(usage: gpt2bench reference-config --profile FILE [--name NAME] [--batch N] [--device D]

Prints the JSON configuration a reference rung runs with (the model, batch, precision, layers, attention,
optimizer, torch.compile's scopes, steps); the ladder writes it as DIR/reference/<name>_b<batch>.config.json.
`python reference/gpt2bench_ref.py --warm CONFIG FORM...` (FORM: parity, model, model_and_loss) fills
torch.compile's on-disk caches from it ahead of a ladder (scripts/gpu_session.sh does so).

  --profile FILE   YAML run profile
  --name NAME      ref_torch_compile (default) or ref_torch_eager
  --batch N        the batch (default: the profile's)
  --device D       auto | cpu | cuda | cuda:N (default: the profile's, else auto)
)";

constexpr const char* kBreakdownHelp = R"(usage: gpt2bench breakdown --profile FILE --out DIR [--rung NAME] [--device D]

For each rung (or the one named, e.g. 07_sdpa or sdpa): builds its step, takes the warm-up steps, times
breakdown_steps steps unprofiled, then as many profiled (ATen ops on the CPU, CUPTI kernels on CUDA) and one
more with op shapes for its FLOPs. Writes DIR/breakdown/<rung>.json (time a phase and category, top ops,
memory at the peak) and DIR/breakdown/<rung>.trace.json (Chrome trace, for https://ui.perfetto.dev).
The ladder runs the same pass after each rung (breakdown_steps: 0 turns it off).
)";

constexpr const char* kReportHelp = R"(usage: gpt2bench report RUN_DIR... --out DIR [--price NAME=USD ...]

Reads each run directory (results.json, rungs.json, breakdown/, kernels.json) and writes DIR/report.md, a
self-contained DIR/report.html and each chart as PNG and SVG: the answer first, then the ladder, memory, MFU,
phases, ablations, the reference rungs, our kernels; with several runs (GPU generations) the same rungs side by
side. --price (a run directory's or device's name = $ a device-hour; none built in) adds the cost of a million
tokens. Prints each run's Findings (the answer), then where the report is. Runs reports/ with the project's venv
(GPT2BENCH_PYTHON overrides the interpreter); docs/reports.md.
)";

constexpr const char* kPrepareHelp = R"(usage: gpt2bench prepare --input TEXT --out DIR [--encoder encoder.json --bpe vocab.bpe]
                         [--val-fraction F] [--shard-tokens N]

Tokenizes TEXT and writes DIR/val_000000.bin, DIR/train_000000.bin, ... in llm.c's shard format
(256 int32 header: magic 20240520, version 1, token count; then uint16 tokens). Without --encoder/--bpe
the tokens are the text's bytes (0..255); with both, GPT-2's BPE. The first F of the tokens (default 0.1)
go to the validation split. Use the shards from a profile with  data: {train: DIR/train_*.bin, val: DIR/val_*.bin}.
)";

constexpr const char* kListHelp = R"(usage: gpt2bench list-variants [--device D] [--markdown]

Prints every registered variant (in ladder order): name, published rung (seed 000 numbering), parity
class, whether it runs on the device (else why not), and one line of why.
  --markdown   docs/variants.md's variant table instead (a test checks the docs against it)
)";

constexpr const char* kDoctorHelp = R"(usage: gpt2bench doctor [--device D]

Prints what this build supports (CUDA, NVTX, CUPTI, NCCL, cuDNN, flash attention) and what the device
supports (bf16, TF32), and the device's facts. Runs without a GPU, and says so.
)";

// --key value pairs after the subcommand; unknown keys are an error naming them.
std::map<std::string, std::string> parse_flags(int argc, char** argv, int first, const std::vector<std::string>& known,
                                               const char* help) {
  std::map<std::string, std::string> out;
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << help;
      std::exit(0);
    }
    std::string key = a, value;
    if (auto eq = a.find('='); eq != std::string::npos) key = a.substr(0, eq), value = a.substr(eq + 1);
    bool ok = false;
    for (const auto& k : known) ok = ok || key == "--" + k;
    if (!ok) throw std::invalid_argument("unknown option '" + key + "'\n\n" + help);
    if (value.empty() && a.find('=') == std::string::npos) {
      if (i + 1 >= argc) throw std::invalid_argument("option " + key + " needs a value");
      value = argv[++i];
    }
    out[key.substr(2)] = value;
  }
  return out;
}

// argv without the switch `name` (a flag that takes no value); `present` says whether it was there.
std::vector<char*> without_switch(int argc, char** argv, const std::string& name, bool& present) {
  std::vector<char*> rest;
  present = false;
  for (int i = 0; i < argc; ++i) {
    if (name == argv[i]) present = true;
    else rest.push_back(argv[i]);
  }
  return rest;
}

std::string need(const std::map<std::string, std::string>& f, const std::string& k, const char* help) {
  auto it = f.find(k);
  if (it == f.end() || it->second.empty()) throw std::invalid_argument("missing --" + k + "\n\n" + help);
  return it->second;
}

std::string get(const std::map<std::string, std::string>& f, const std::string& k, const std::string& def = "") {
  auto it = f.find(k);
  return it == f.end() ? def : it->second;
}

// A flag's value that must be a whole number >= 1 ("--steps 0", "--batch x" are refused by name).
int positive_int(const std::string& v, const std::string& flag) {
  size_t used = 0;
  int x = 0;
  try {
    x = std::stoi(v, &used);
  } catch (const std::logic_error&) {
    used = 0;
  }
  if (used != v.size() || v.empty() || x < 1) throw std::invalid_argument(flag + " takes a whole number >= 1, got '" + v + "'");
  return x;
}

int cmd_ladder(int argc, char** argv) {
  bool verbose = false;
  std::vector<char*> rest = without_switch(argc, argv, "--verbose", verbose);
  auto f = parse_flags(static_cast<int>(rest.size()), rest.data(), 2, {"profile", "out", "device", "rung", "resume"},
                       kLadderHelp);
  LadderOptions o{get(f, "profile"), get(f, "out"), get(f, "device"), get(f, "rung")};
  o.verbose = verbose;
  if (f.count("resume")) {
    // The profile the run was made with, unless named again.
    o.resume = true;
    if (!o.out_dir.empty() && o.out_dir != f["resume"])
      throw std::invalid_argument("--resume DIR writes into DIR; drop --out or give the same directory");
    o.out_dir = f["resume"];
    const nlohmann::json doc = read_rungs_json(o.out_dir);
    if (o.profile_path.empty()) {
      const nlohmann::json path = doc.value("profile", nlohmann::json::object()).value("path", nlohmann::json());
      if (!path.is_string()) throw std::runtime_error(o.out_dir + "/rungs.json names no profile; name it with --profile");
      o.profile_path = path.get<std::string>();
    }
    if (!f.count("rung") && doc.value("rung_filter", "") != "") {
      o.rung_filter = doc["rung_filter"].get<std::string>();
      std::cerr << "gpt2bench: --resume keeps the run's --rung '" << o.rung_filter << "' (--rung= for every rung)\n";
    }
  }
  if (o.profile_path.empty()) throw std::invalid_argument(std::string("missing --profile\n\n") + kLadderHelp);
  if (o.out_dir.empty()) throw std::invalid_argument(std::string("missing --out\n\n") + kLadderHelp);
  return run_ladder(o);
}

int cmd_ddp_check(int argc, char** argv) {
  auto f = parse_flags(argc, argv, 2, {"profile", "out", "steps", "batch", "device"}, kDdpCheckHelp);
  DdpCheckOptions o;
  o.profile_path = need(f, "profile", kDdpCheckHelp);
  o.out_dir = need(f, "out", kDdpCheckHelp);
  o.device = get(f, "device");
  o.steps = positive_int(get(f, "steps", "5"), "--steps");
  if (f.count("batch")) o.batch = positive_int(f["batch"], "--batch");
  return run_ddp_check(o);
}

int cmd_breakdown(int argc, char** argv) {
  auto f = parse_flags(argc, argv, 2, {"profile", "out", "rung", "device"}, kBreakdownHelp);
  return run_breakdown({need(f, "profile", kBreakdownHelp), need(f, "out", kBreakdownHelp), get(f, "device"), get(f, "rung")});
}

int cmd_kernels(int argc, char** argv) {
  auto f = parse_flags(argc, argv, 2, {"profile", "out", "device", "rounds", "only"}, kKernelsHelp);
  KernelBenchOptions o{need(f, "profile", kKernelsHelp), get(f, "device"), get(f, "out"),
                       positive_int(get(f, "rounds", "15"), "--rounds"), get(f, "only")};
  return run_kernel_bench(o);
}

int cmd_reference_config(int argc, char** argv) {
  auto f = parse_flags(argc, argv, 2, {"profile", "name", "batch", "device"}, kReferenceConfigHelp);
  const Profile prof = load_profile(need(f, "profile", kReferenceConfigHelp));
  const DeviceInfo dev = detect_device(get(f, "device", prof.device));
  const int64_t batch = f.count("batch") ? positive_int(f["batch"], "--batch") : prof.batch;
  std::cout << reference_config(get(f, "name", "ref_torch_compile"), prof, dev, batch).dump(2) << "\n";
  return 0;
}

int cmd_report(int argc, char** argv) {
  std::vector<std::string> args, prices;
  std::string out;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << kReportHelp;
      return 0;
    }
    if (a == "--out" && i + 1 < argc) out = argv[++i];
    else if (a.rfind("--out=", 0) == 0) out = a.substr(6);
    else if (a == "--price" && i + 1 < argc) prices.push_back(argv[++i]);  // checked by the report step
    else if (a.rfind("--price=", 0) == 0) prices.push_back(a.substr(8));
    else if (a.rfind("--", 0) == 0) throw std::invalid_argument("unknown option '" + a + "'\n\n" + kReportHelp);
    else args.push_back(a);
  }
  if (args.empty()) throw std::invalid_argument(std::string("name at least one run directory\n\n") + kReportHelp);
  if (out.empty()) throw std::invalid_argument(std::string("missing --out\n\n") + kReportHelp);
  const std::string python = project_python();
  const std::string reports = std::string(GPT2BENCH_SOURCE_DIR) + "/reports";
  const char* old = std::getenv("PYTHONPATH");
  ::setenv("PYTHONPATH", (reports + (old && *old ? ":" + std::string(old) : "")).c_str(), 1);
  std::vector<std::string> cmd = {python, "-m", "gpt2bench_report"};
  cmd.insert(cmd.end(), args.begin(), args.end());
  cmd.insert(cmd.end(), {"--out", out});
  for (const auto& p : prices) cmd.insert(cmd.end(), {"--price", p});
  std::vector<char*> cargv;
  for (auto& c : cmd) cargv.push_back(c.data());
  cargv.push_back(nullptr);
  ::execvp(cargv[0], cargv.data());
  throw std::runtime_error("cannot run " + python + ": " + std::strerror(errno) + " (set GPT2BENCH_PYTHON)");
}

int cmd_prepare(int argc, char** argv) {
  auto f = parse_flags(argc, argv, 2, {"input", "out", "encoder", "bpe", "val-fraction", "shard-tokens"}, kPrepareHelp);
  PrepareOptions o;
  o.input = need(f, "input", kPrepareHelp);
  o.out_dir = need(f, "out", kPrepareHelp);
  o.encoder_json = get(f, "encoder");
  o.vocab_bpe = get(f, "bpe");
  try {
    if (f.count("val-fraction")) o.val_fraction = std::stod(f["val-fraction"]);
    if (f.count("shard-tokens")) o.shard_tokens = std::stoll(f["shard-tokens"]);
  } catch (const std::logic_error&) {
    throw std::invalid_argument("--val-fraction takes a number and --shard-tokens an integer");
  }
  for (const auto& path : prepare_text(o)) std::cout << "wrote " << path << "\n";
  return 0;
}

int cmd_list_variants(int argc, char** argv) {
  bool markdown = false;
  std::vector<char*> rest = without_switch(argc, argv, "--markdown", markdown);
  auto f = parse_flags(static_cast<int>(rest.size()), rest.data(), 2, {"device"}, kListHelp);
  if (markdown) {
    std::cout << variants_markdown();
    return 0;
  }
  const DeviceInfo dev = detect_device(get(f, "device", "auto"));
  std::cout << "device: " << dev.name << (dev.cuda() ? " (cuda)" : " (cpu)") << "\n";
  if (registry().empty()) std::cout << "(no variants registered: every ladder is the baseline rung alone)\n";
  for (const auto& v : registry()) {
    const Support s = v->supports(dev);
    std::printf("%-16s rung %-3s parity %-10s %s%s\n    %s\n", std::string(v->name).c_str(),
                v->published_rung < 0 ? "-" : std::to_string(v->published_rung).c_str(),
                to_string(v->parity).c_str(), s.ok ? "runs here" : ("skipped here: " + s.why_not).c_str(),
                v->extra() ? " (extra: run on top of the ladder)" : "", std::string(v->why).c_str());
  }
  return 0;
}

int cmd_doctor(int argc, char** argv) {
  auto f = parse_flags(argc, argv, 2, {"device"}, kDoctorHelp);
  return run_doctor(get(f, "device", "auto"));
}

// `--nproc N` (ladder, ddp-check): start N local ranks running the same command without it.
std::optional<int> launched(int argc, char** argv) {
  std::vector<std::string> rest;
  int nproc = 0;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--nproc" && i + 1 < argc) {
      a += "=" + std::string(argv[++i]);
    }
    if (a.rfind("--nproc=", 0) == 0) {
      nproc = positive_int(a.substr(8), "--nproc");
      continue;
    }
    rest.push_back(a);
  }
  if (nproc == 0) return std::nullopt;
  if (std::getenv("WORLD_SIZE"))
    throw std::invalid_argument("--nproc inside a launched process (WORLD_SIZE is set): use one launcher");
  return launch_local(nproc, rest);
}

}  // namespace

int cli_main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "help";
  settle_host_allocator();  // before the first large allocation (see memory.h)
  settle_device_allocator();  // before the first CUDA allocation, and for the processes the ladder starts
  try {
    if (cmd == "ladder" || cmd == "ddp-check")
      if (auto code = launched(argc, argv)) return *code;
    if (cmd == "ladder") return cmd_ladder(argc, argv);
    if (cmd == "ddp-check") return cmd_ddp_check(argc, argv);
    if (cmd == "prepare") return cmd_prepare(argc, argv);
    if (cmd == "breakdown") return cmd_breakdown(argc, argv);
    if (cmd == "report") return cmd_report(argc, argv);
    if (cmd == "kernels") return cmd_kernels(argc, argv);
    if (cmd == "reference-config") return cmd_reference_config(argc, argv);
    if (cmd == "list-variants") return cmd_list_variants(argc, argv);
    if (cmd == "doctor") return cmd_doctor(argc, argv);
    if (cmd == "help" || cmd == "--help" || cmd == "-h") {
      std::cout << kMainHelp;
      return argc > 1 ? 0 : 2;
    }
    std::cerr << "gpt2bench: unknown command '" << cmd << "'\n\n" << kMainHelp;
    return 2;
  } catch (const std::invalid_argument& e) {  // bad input: exit 2, as for an unknown command
    std::cerr << "gpt2bench " << cmd << ": error: " << e.what() << "\n";
    return 2;
  } catch (const c10::Error& e) {
    std::cerr << "gpt2bench " << cmd << ": error: " << e.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "gpt2bench " << cmd << ": error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace gpt2
