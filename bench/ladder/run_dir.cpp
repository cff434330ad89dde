#include "bench/ladder/run_dir.h"

#include <torch/version.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include "bench/ladder/peaks.h"
#include "bench/runtime/datasheet.h"
#include "bench/runtime/device.h"  // build_has_cuda
#include "bench/runtime/memory.h"  // settle_*_allocator
#include "common/files.h"
#include "common/format.h"
#include "variants/registry.h"

namespace gpt2 {
namespace {

nlohmann::json read_json_file(const std::string& path, const std::string& what_if_missing) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error(path + ": " + what_if_missing + " (no such file)");
  try {
    return nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path + ": not valid JSON (" + e.what() + ")");
  }
}

// A rung --resume keeps: it ended as it will end again with this build on this device. A device fault too: run
// again, it would lose the new process's device as well, and every rung after it with it; and so a rung that ended
// its processes (carry_ended).
bool complete(const nlohmann::json& rung) {
  const RungStatus s = rung_status_from(rung.at("status").get<std::string>());
  return s == RungStatus::kOk || s == RungStatus::kSkipped || s == RungStatus::kDiverged || s == RungStatus::kOom ||
         (s == RungStatus::kError &&
          (rung.value("device_fault", false) || rung.value("ended_processes", int64_t{0}) >= kProcessEndsARungMayCause));
}

// A rung not complete in the earlier run: the processes that ended in it recording nothing, that one's included
// where it was in flight (a crash, a kill) — run again after one, an error after kProcessEndsARungMayCause, said.
void carry_ended(RungRecord& r, const nlohmann::json& j) {
  const bool ended_in_it = j.value("in_flight", false);
  r.out.ends.read(j);  // (not complete: no device fault)
  r.out.ends.ended += ended_in_it ? 1 : 0;
  if (!ended_in_it) return;
  if (r.out.ends.ended >= kProcessEndsARungMayCause) {
    r.out.status = RungStatus::kError;
    r.out.error = "its process ended during this rung " + std::to_string(r.out.ends.ended) +
                  " times, recording nothing (a crash, or a kill it could not stop for: the ladder's log says which);"
                  " --resume does not run it again";
    std::cerr << "gpt2bench: " << r.name() << ": " << r.out.error << "\n";
  } else {
    std::cerr << "gpt2bench: " << r.name() << ": the last process ended during it, recording nothing (a crash, or a"
              << " kill it could not stop for): run again; a second such end records it as an error\n";
  }
}

std::string lock_path(const std::string& dir) { return files::join(dir, ".lock"); }

std::string holder_text(int fd) {
  char buf[512];
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  std::string s(buf, n > 0 ? static_cast<size_t>(n) : 0);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s.empty() ? "it has not said who it is yet" : s;
}

}  // namespace

RunLock::RunLock(const std::string& dir) {
  const std::string path = lock_path(dir);
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);  // CLOEXEC: a child never holds it
  if (fd_ < 0) throw std::runtime_error(path + ": cannot open the run's lock file (" + std::strerror(errno) + ")");
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = holder_text(fd_);
    ::close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK) throw std::runtime_error(path + ": cannot lock it (" + std::strerror(err) + ")");
    throw std::runtime_error(dir + " is in use by another gpt2bench process (" + holder +
                             "): one process a run directory; wait for it to end (then --resume it if it stopped "
                             "short), or choose another --out");
  }
  char host[256] = "?";
  ::gethostname(host, sizeof(host) - 1);
  char when[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
  const std::string me = "pid " + std::to_string(::getpid()) + " on " + host + ", since " + when + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size()))
    std::cerr << "gpt2bench: " << path << ": could not say who holds the lock (" << std::strerror(errno) << ")\n";
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // the lock goes with the descriptor; the file stays (see run_dir.h)
}

bool RunLock::held(const std::string& dir) {
  const int fd = ::open(lock_path(dir).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool busy = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return busy;
}

nlohmann::json read_rungs_json(const std::string& dir) {
  const std::string path = files::join(dir, "rungs.json");
  if (!files::exists(path)) throw std::runtime_error(dir + ": nothing to resume (no rungs.json)");
  try {
    return read_json_file(path, "nothing to resume");
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string(e.what()) + ": the run's rungs cannot be restored from it, so --resume "
                             "cannot go on; start a new --out");
  }
}

std::string torch_version() { return TORCH_VERSION; }

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
  // Carried binaries run in another checkout (scripts/gpu_session.sh, its files checked against theirs) are said by
  // their own commit: there `git` read a stale HEAD and called the tree dirty (an H100 run said 320402515242-dirty
  // of binaries built at 4f0791ce96db).
  if (const char* carried = std::getenv("GPT2BENCH_GIT_SHA"); carried && *carried) return carried;
  const std::string dir = GPT2BENCH_SOURCE_DIR;
  std::string sha = run("git -C '" + dir + "' rev-parse --short=12 HEAD 2>/dev/null");
  if (sha.empty()) return GPT2BENCH_GIT_SHA;
  if (!run("git -C '" + dir + "' status --porcelain --untracked-files=no 2>/dev/null").empty()) sha += "-dirty";
  return sha;
}

std::string build_id() { return git_sha() + " torch " + torch_version() + (build_has_cuda() ? " cuda" : " cpu"); }

double run_budget_s(const Profile& prof, const DeviceInfo& dev) {
  if (prof.budget_minutes) return *prof.budget_minutes * 60;
  return dev.cuda() ? 0 : 15 * 60;
}

nlohmann::json run_header(const Profile& prof, const DeviceInfo& dev, const std::vector<RungRecord>& records,
                          const std::string& build_id, const std::string& rung_filter) {
  nlohmann::json doc = {{"profile", {{"name", prof.name}, {"path", prof.path}, {"plan", prof.plan},
                                     {"batch", prof.batch}, {"warmup_steps", prof.warmup_steps},
                                     {"steps", prof.steps}, {"repetitions", prof.repetitions},
                                     {"parity_steps", prof.parity_steps}, {"seed", prof.seed},
                                     {"budget_s", run_budget_s(prof, dev)},
                                     {"budget_basis", prof.budget_minutes ? "profile (budget_minutes)"
                                                      : dev.cuda() ? "none (a GPU's default)" : "15 minutes (a CPU's default)"},
                                     {"data", prof.data.synthetic ? "synthetic" : prof.data.train_glob}}},
                        {"device", dev},
                        {"build", {{"torch", torch_version()}, {"cuda", build_has_cuda()}, {"git_sha", git_sha()}}}};
  if (const auto row = dev.cuda() ? find_datasheet(dev.name) : std::nullopt)
    doc["device"]["datasheet"] = {{"model", row->model}, {"bf16_tflops", row->bf16_tflops},
                                  {"fp16_tflops", row->fp16_tflops}, {"tf32_tflops", row->tf32_tflops},
                                  {"fp32_tflops", row->fp32_tflops},
                                  {"memory_bandwidth_gbs", row->memory_bandwidth_gbs}, {"source", row->source}};
  doc["mfu"] = {{"definition", "model FLOPs/s (matmuls only: flops.formula) / mfu peak, the same for every rung"},
                {"peak", records.empty() ? nlohmann::json() : (records[0].plan.mfu_peak ? nlohmann::json(*records[0].plan.mfu_peak) : nlohmann::json())},
                {"basis", records.empty() ? "" : records[0].plan.mfu_basis},
                {"also", "median.mfu_vs_precision_peak: over the datasheet peak of the rung's own precision; "
                         "median.mfu_vs_measured_peak: over the matmul rate measured here in that precision"}};
  // What each variant is, so that the report reads a rung's traits (its variant's parity class) and not its name.
  for (const Variant* v : registry())
    doc["variants"][std::string(v->name)] = {{"parity", to_string(v->parity)}, {"extra", v->extra()}, {"anti", v->anti}};
  doc["host_allocator"] = settle_host_allocator();  // set at start-up (cli_main); "" where not glibc
  if (dev.cuda()) doc["device_allocator"] = settle_device_allocator();  // likewise
  doc["rung_filter"] = rung_filter;  // --resume keeps it
  doc["fingerprint"] = fingerprint(prof, records);
  doc["build_id"] = build_id;
  return doc;
}

std::string fingerprint(const Profile& prof, const std::vector<RungRecord>& records) {
  nlohmann::json j = {{"seed", prof.seed}, {"batch", prof.batch}, {"warmup_steps", prof.warmup_steps},
                      {"steps", prof.steps}, {"repetitions", prof.repetitions}, {"parity_steps", prof.parity_steps},
                      {"breakdown_steps", prof.breakdown_steps},
                      {"data", prof.data.synthetic ? "synthetic" : prof.data.train_glob + "|" + prof.data.val_glob}};
  for (const auto& r : records) j["rungs"].push_back({r.plan.rung.name, r.plan.rung.spec});
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (char c : j.dump()) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return strf("%016llx", static_cast<unsigned long long>(h));
}

std::string device_identity(const nlohmann::json& d) {
  auto text = [&](const char* key) {
    const auto it = d.find(key);
    return it == d.end() ? std::string() : it->is_string() ? it->get<std::string>() : it->dump();
  };
  const bool cpu = text("type") == "cpu";
  std::string s = text("name") + " (" + text("type");
  if (cpu)
    s += ", " + (text("cpu_model_id").empty() ? std::string("model not recorded") : text("cpu_model_id")) + ", " +
         text("sm_count") + " threads";
  else
    s += ", cc " + text("compute_capability") + ", " + text("sm_count") + " SMs, driver " + text("driver_version") +
         ", CUDA runtime " + text("runtime_version");
  return s + ", " + text("world_size") + " process(es))";
}

Kept resume_or_start(bool resume, const std::string& out_dir, const Profile& prof, std::vector<RungRecord>& records,
                     const std::string& build_id, const DeviceInfo& dev) {
  Kept kept;
  if (!resume) {
    if (files::exists(files::join(out_dir, "results.json")))
      throw std::runtime_error(out_dir + " already holds results.json; choose another --out, or --resume it");
    return kept;
  }
  const auto old = read_rungs_json(out_dir);
  const auto old_results = read_json_file(files::join(out_dir, "results.json"), "nothing to resume");
  if (old.value("fingerprint", "") != fingerprint(prof, records))
    throw std::runtime_error("cannot resume " + out_dir + ": it was run with another profile or settings (" +
                             old["profile"].value("path", "?") + "); start a new --out");
  if (old.value("build_id", "") != build_id)
    throw std::runtime_error("cannot resume " + out_dir + ": it was run by another build (" +
                             old.value("build_id", "?") + ", this is " + build_id + "); start a new --out");
  const std::string was = device_identity(old.value("device", nlohmann::json::object())),
                    is = device_identity(nlohmann::json(dev));
  if (was != is)
    throw std::runtime_error("cannot resume " + out_dir + ": it was run on another device (" + was + ", this is " + is +
                             "); its ratios compare rungs timed on one device: start a new --out");
  size_t n = 0;
  for (auto& r : records)
    for (const auto& j : old["rungs"])
      if (j["name"] == r.plan.rung.name && complete(j)) {
        restore(r, j);
        ++n;
        for (const auto& b : old_results["benchmarks"])
          if (b["run_name"].get<std::string>().rfind(r.plan.benchmark_name + "/", 0) == 0) kept.benchmarks.push_back(b);
      } else if (j["name"] == r.plan.rung.name) {
        carry_ended(r, j);
      }
  kept.context = old_results["context"];
  kept.cards = old.value("cards", nlohmann::json::array());
  kept.measured = old.value("measured", nlohmann::json());
  kept.complete = old.value("status", "") == "complete";
  for (const auto& ref : old.value("references", nlohmann::json::array()))
    if (ref.value("status", "") == "ok") kept.references.push_back(ref);
  std::cerr << "gpt2bench: resuming " << out_dir << ": " << n << " of " << records.size()
            << " rungs already complete, " << kept.references.size() << " reference(s)\n";
  return kept;
}

nlohmann::json cards_with(const nlohmann::json& earlier, const std::string& uuid) {
  nlohmann::json cards = earlier.is_array() ? earlier : nlohmann::json::array();
  if (!uuid.empty() && std::find(cards.begin(), cards.end(), uuid) == cards.end()) cards.push_back(uuid);
  return cards;
}

RunWriter::RunWriter(const std::string& dir, nlohmann::json header, Kept kept, const Peaks* peaks)
    : rungs_path_(files::join(dir, "rungs.json")), results_path_(files::join(dir, "results.json")),
      doc_(std::move(header)), kept_(std::move(kept)), peaks_(peaks) {
  doc_["references"] = kept_.references;
  const nlohmann::json cards = cards_with(kept_.cards, doc_["device"].value("uuid", ""));
  if (!cards.empty()) doc_["cards"] = cards;
}

void RunWriter::flush(const std::vector<RungRecord>& records, const std::string& status) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : records) list.push_back(to_json(r));
  doc_["rungs"] = list;
  doc_["status"] = status;
  if (peaks_) doc_["measured"] = peaks_->to_json();
  if (!records.empty() && doc_.contains("mfu")) {  // a peak raised to an achieved rate moves the MFU peak too
    doc_["mfu"]["peak"] = records[0].plan.mfu_peak ? nlohmann::json(*records[0].plan.mfu_peak) : nlohmann::json();
    doc_["mfu"]["basis"] = records[0].plan.mfu_basis;
  }
  files::write_file_atomic(rungs_path_, doc_.dump(2) + "\n");
  if (!reporter_ && kept_.benchmarks.empty()) return;
  nlohmann::json results = reporter_ ? nlohmann::json::parse(reporter_->json_so_far())
                                     : nlohmann::json{{"context", kept_.context}, {"benchmarks", nlohmann::json::array()}};
  nlohmann::json all = kept_.benchmarks;
  for (const auto& b : results["benchmarks"]) all.push_back(b);
  results["benchmarks"] = all;
  files::write_file_atomic(results_path_, results.dump(2) + "\n");
}

}  // namespace gpt2
