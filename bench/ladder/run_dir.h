// defines: the run directory and what --resume reads back: build_id, git_sha, torch_version, fingerprint and
//          device_identity (what must match), RunLock (one process a directory), Kept and resume_or_start (an
//          earlier run's finished work), RunWriter (the one writer of rungs.json and results.json).
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "bench/ladder/results.h"
#include "bench/runtime/device_info.h"
#include "config/profile.h"

namespace gpt2 {

std::string torch_version();  // libtorch's, as built against
// The source tree's commit at run time ("-dirty" with uncommitted changes); the configure-time sha where
// the tree is not a git checkout any more.
std::string git_sha();
// What a run was made by: the commit, torch, CPU or CUDA build. --resume refuses another.
std::string build_id();

// The run's time budget in seconds (0 = none): the profile's budget_minutes, else 15 minutes on a CPU (make ladder
// on any 2-core machine) and none on a GPU.
double run_budget_s(const Profile& prof, const DeviceInfo& dev);

// rungs.json without its rungs: the profile, device (with its datasheet row), build, MFU basis, every variant's
// traits, --rung, fingerprint.
nlohmann::json run_header(const Profile& prof, const DeviceInfo& dev, const std::vector<RungRecord>& records,
                          const std::string& build_id, const std::string& rung_filter);

// What must match for --resume: the resolved rungs and the measurement settings (not the time budget).
std::string fingerprint(const Profile& prof, const std::vector<RungRecord>& records);

// The device rungs.json's `device` records, in words: what --resume must find again (a run's ratios are of one
// device's timings). Name, type, CPU model, compute capability, SMs or threads, processes, driver and runtime; not
// the memory total (a CPU's moves by a few KB between boots).
std::string device_identity(const nlohmann::json& device);

// One process owns a run directory while it writes there: an advisory lock (flock) on DIR/.lock, which names
// its holder (pid, host, start). The kernel drops it when the process ends, however it ends, so a run that
// crashed or was killed is taken over by --resume; a live one refuses a second process at once.
class RunLock {
 public:
  explicit RunLock(const std::string& dir);  // throws std::runtime_error naming the holder
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  // Whether some process holds DIR's lock now (false where DIR has no lock file).
  static bool held(const std::string& dir);

 private:
  int fd_ = -1;
};

// What an earlier run in DIR leaves to this one: its complete rungs' Google Benchmark results.
struct Kept {
  std::vector<nlohmann::json> benchmarks;
  nlohmann::json context;
  nlohmann::json references = nlohmann::json::array();  // the reference rungs that finished (status ok)
  nlohmann::json cards = nlohmann::json::array();       // the GPUs (UUIDs) its earlier sessions were timed on
  nlohmann::json measured;  // its peaks (rungs.json's "measured"), measured once a run; null: measure them
  bool complete = false;    // it ended complete: every rung and reference done
};

// rungs.json of the run in DIR, for --resume: a clear error where it is missing or damaged.
nlohmann::json read_rungs_json(const std::string& dir);

// The cards a run has been timed on: the earlier sessions' (rungs.json's `cards`) and this one's `uuid` (a GPU's;
// "" on a CPU adds none), each once, in order. More than one: a run resumed on another card (a lease is a fresh
// machine), whose references may be compared with rungs timed on another card than theirs.
nlohmann::json cards_with(const nlohmann::json& earlier, const std::string& uuid);

// --resume: the earlier run's finished rungs (restored into `records`) and references are kept, where the profile
// resolves alike and the build and device are the same; a rung it ended in counts `ended_processes` (results.h).
// Without --resume, DIR must not hold a run already.
Kept resume_or_start(bool resume, const std::string& out_dir, const Profile& prof, std::vector<RungRecord>& records,
                     const std::string& build_id, const DeviceInfo& dev);

// The one writer of DIR/rungs.json and DIR/results.json, both rewritten atomically on every flush.
class Peaks;
class RunWriter {
 public:
  // `peaks`: rungs.json's "measured" and MFU peak, as they stand at each flush (a peak can rise: peaks.h).
  RunWriter(const std::string& dir, nlohmann::json header, Kept kept, const Peaks* peaks = nullptr);
  void attach(const TeeReporter* reporter) { reporter_ = reporter; }
  const std::string& rungs_path() const { return rungs_path_; }
  const std::string& results_path() const { return results_path_; }
  void set_references(const nlohmann::json& refs) { doc_["references"] = refs; }
  nlohmann::json references() const { return doc_.value("references", nlohmann::json::array()); }
  void flush(const std::vector<RungRecord>& records, const std::string& status);

 private:
  std::string rungs_path_, results_path_;
  nlohmann::json doc_;
  Kept kept_;
  const TeeReporter* reporter_ = nullptr;
  const Peaks* peaks_ = nullptr;
};

}  // namespace gpt2
