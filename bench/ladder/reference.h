// defines: reference rungs — the same GPT-2 step in Python PyTorch (reference/gpt2bench_ref.py), run as a
//          subprocess on the ladder's device, data and batch, reported beside the C++ rungs in rungs.json's
//          "references"; ref_torch_eager and ref_torch_compile, fixed so that no comparison can be weakened.
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace at {
class Tensor;
}

namespace gpt2 {

struct ClockSamples;
struct DeviceInfo;
struct Profile;
struct RungRecord;
struct Trajectory;

// The reference rungs there are, in the order they run.
const std::vector<std::string>& reference_names();

// What the script reads for reference `name` (one of reference_names()) at `batch`: the model
// (the profile's, padded for ref_torch_compile), precision, layers, attention, optimizer, steps; `parity_eager`
// where its parity run goes uncompiled (ref_torch_compile at another batch than the profile's).
nlohmann::json reference_config(const std::string& name, const Profile& prof, const DeviceInfo& dev, int64_t batch);

// Paired timing's C++ side: called once the script has timed its forms and holds its fastest, with a function that
// runs one repetition of it and returns its seconds a step (throwing where the script ended). It must not throw.
using PairedTiming = std::function<void(const std::function<double()>& python_repetition)>;

// Runs one reference with `budget_s` (< 0 none, 0 spent): DIR/reference/<name>_b<batch>.{config.json,tokens,log}.
// Returns rungs.json's entry: name, status (ok | error), error, config, the script's result. Never throws for a
// failing script: its last line of output is the error. With `beside`, paired timing (bench/ladder/paired.h).
nlohmann::json run_reference(const std::string& name, nlohmann::json config, const at::Tensor& train_tokens,
                             const std::string& dir, double budget_s, const PairedTiming& beside = {});

// Throws, saying how to mend it, where `python` (project_python()) is not an executable: checked before a ladder
// with reference rungs writes anything.
void check_python_runs(const std::string& python);
// Whether any reference in rungs.json's `references` ended in error: the run is then partial, its exit code 1.
bool references_failed(const nlohmann::json& refs);

// The (name, batch) runs after the rungs: each of `selected` at `batch`, then ref_torch_compile at batch_scaling's
// `searched_batch` (0: still to run), less those `kept` from an earlier run of the same plan (--resume).
std::vector<std::pair<std::string, int64_t>> references_to_run(const std::vector<std::string>& selected, int64_t batch,
                                                               std::optional<int64_t> searched_batch,
                                                               const nlohmann::json& kept);

// The clocks over the reference's timed window (time.monotonic(), the samples' clock) out of `samples`: ref["clocks"]
// for the form it reports, ref["compile_scope_clocks"][scope] for each compiled form; unavailable, with the reason,
// without samples (a CPU, no NVML) or a window.
void attach_reference_clocks(nlohmann::json& ref, const ClockSamples& samples);

// Sets `compared_with`, `ratio` (the C++ rung's tok/s over the reference's) and the parity of the
// reference's first losses and first gradient norm against the C++ baseline's (`baseline`; at another batch its step
// there, `baseline_at`, where one ran); where both sides ran a breakdown, `events_per_step` and `category_ms` (ms a
// step by kind of work: the C++ rung's, the reference's).
void compare_reference(nlohmann::json& ref, const std::vector<RungRecord>& rungs, const Trajectory& baseline,
                       const std::map<int64_t, Trajectory>& baseline_at = {});

// The C++ rung a reference at config["batch"] is compared with (nullptr: none); `passed_over` set in `ref`.
const RungRecord* compared_rung(nlohmann::json& ref, const std::vector<RungRecord>& rungs);

// `again`: the C++ rung the reference was compared with, timed again right after it (Ladder::retime). Sets
// ref["again"]: that rung, its median tok/s, its ratio to the reference with the same interval as `ratio`'s, its
// repetitions and clocks; or why there is none (it failed, diverged, was interrupted). With `python_step_s` (paired
// timing: the script's repetitions, each beside the C++ one of its index), the ratio is the pairs' and becomes the
// reference's own `ratio`; the ladder's timing's is kept in `first_timing`.
void compare_again(nlohmann::json& ref, const RungRecord& again, const std::vector<double>& python_step_s = {});

// One console line (at most 160 characters), then one for each faster rung it was not compared with (passed_over).
std::string reference_line(const nlohmann::json& ref);
// The line for ref["again"].
std::string again_line(const nlohmann::json& ref);

}  // namespace gpt2
