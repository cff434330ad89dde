// defines: reference rungs — the same GPT-2 step in Python PyTorch (reference/gpt2bench_ref.py), run as a
//          subprocess on the ladder's device, data and batch, reported beside the C++ rungs in rungs.json's
//          "references"; ref_torch_eager and ref_torch_compile, fixed so that no comparison can be weakened.
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
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

// Runs one reference: writes DIR/reference/<name>_b<batch>.config.json and the tokens it needs (int64, from
// the start of `train_tokens`), runs the script with `budget_s` (< 0: none; 0: spent, the floor) for its compilation,
// warm-up and timed steps, its output in DIR/reference/<name>_b<batch>.log (one set of files a run: ref_torch_compile
// runs at two batches). Returns the entry rungs.json
// keeps: name, status (ok | error; the ladder marks one its own stop ended `interrupted`), error, config,
// and the script's result. Never throws for a failing script: its last line of output is the error.
nlohmann::json run_reference(const std::string& name, nlohmann::json config, const at::Tensor& train_tokens,
                             const std::string& dir, double budget_s);

// Throws, saying how to mend it, where `python` (project_python()) is not an executable: checked before a ladder
// with reference rungs writes anything.
void check_python_runs(const std::string& python);
// Whether any reference in rungs.json's `references` ended in error: the run is then partial, its exit code 1.
bool references_failed(const nlohmann::json& refs);

// The reference runs a ladder makes after its rungs, as (name, batch), in order: each of `selected` at the
// profile's `batch`, then ref_torch_compile again at batch_scaling's batch where that rung runs on one process
// at another batch (`searched_batch`: none without such a rung; 0 while it is still to run, then counted as one
// more run) — less those `kept` (rungs.json entries) from an earlier run of the same plan, which --resume keeps.
std::vector<std::pair<std::string, int64_t>> references_to_run(const std::vector<std::string>& selected, int64_t batch,
                                                               std::optional<int64_t> searched_batch,
                                                               const nlohmann::json& kept);

// The device's clocks over the reference's timed repetitions, out of `samples` this process took while it ran (the
// script stamps its repetitions' window with time.monotonic(), the samples' clock): ref["clocks"] over the window of
// the form it reports, and ref["compile_scope_clocks"][scope] over each compiled form's own, as a C++ rung's `clocks`
// are over its repetitions. Unavailable with the reason where there are no samples (the CPU; no NVML) or no window.
// Nothing for a reference without a result.
void attach_reference_clocks(nlohmann::json& ref, const ClockSamples& samples);

// Sets `compared_with`, `ratio` (the C++ rung's tok/s over the reference's) and the parity of the
// reference's first losses and first gradient norm against the C++ baseline's (`baseline`).
void compare_reference(nlohmann::json& ref, const std::vector<RungRecord>& rungs, const Trajectory& baseline);

// `again`: the C++ rung the reference was compared with, timed again right after it (Ladder::retime). Sets
// ref["again"]: that rung, its median tok/s, its ratio to the reference with the same interval as `ratio`'s, its
// repetitions and clocks; or why there is none (it failed, diverged, was interrupted).
void compare_again(nlohmann::json& ref, const RungRecord& again);

// One console line (at most 160 characters), then one for each faster rung it was not compared with (passed_over).
std::string reference_line(const nlohmann::json& ref);
// The line for ref["again"].
std::string again_line(const nlohmann::json& ref);

}  // namespace gpt2
