#include "bench/ladder/reference_rungs.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <iostream>
#include <optional>

#include "bench/ladder/lost_device.h"
#include "bench/ladder/reference.h"
#include "bench/ladder/select.h"
#include "common/errors.h"
#include "common/python.h"

namespace gpt2 {

bool fits_beside(const RungRecord& with, const DeviceInfo& dev) {
  return !dev.cuda() || dev.total_memory <= 0 ||
         static_cast<double>(with.out.memory.peak_reserved_bytes) <= kPairedMemoryShare * static_cast<double>(dev.total_memory);
}

namespace {

// The C++ rung's second timing: paired with the reference's repetitions, or after it.
struct Again {
  std::optional<RungRecord> record;
  std::vector<double> python_step_s;  // paired: the reference's repetitions, each beside the C++ one of its index
  std::string error;
  std::optional<ClockSamples> ref_samples;  // the clocks while the reference timed its forms (paired: taken first)
};

double again_share(const RungRunner& ladder, int64_t runs_left) {
  return ladder.budget.limited() ? ladder.budget.share_s(runs_left - 1) : INFINITY;
}

// Paired timing's C++ side: `with` built and timed, one of the reference's repetitions beside each of its own.
PairedTiming pair_with(const RungRecord& with, const std::string& name, int64_t runs_left, RungRunner& ladder, Again& a) {
  return [&with, name, runs_left, &ladder, &a](const std::function<double()>& python_repetition) {
    if (ladder.clocks) ladder.clocks->stop(), a.ref_samples = ladder.clocks->take_samples();
    std::cerr << "[ref] " << with.name() << " timed again, its repetitions paired with " << name << "'s: build + "
              << ladder.warmup_steps() << " warm-up steps\n";
    try {
      a.record = ladder.retime(with, again_share(ladder, runs_left),
                               [&] { a.python_step_s.push_back(python_repetition()); });
    } catch (const c10::OutOfMemoryError&) {  // it did not fit beside the reference after all: timed after it
      a.python_step_s.clear();
    } catch (const std::exception& e) {
      a.error = error_text(e);
    }
    ladder.release();
  };
}

// The reference's C++ rung, `with`, timed again after it (not paired), into `a`.
void time_again_after(const RungRecord& with, const std::string& name, int64_t runs_left, RungRunner& ladder, Again& a) {
  std::cerr << "[ref] " << with.name() << " timed again after " << name << ": build + " << ladder.warmup_steps()
            << " warm-up steps\n";
  try {
    a.record = ladder.retime(with, again_share(ladder, runs_left));
  } catch (const std::exception& e) {
    a.error = error_text(e);
  }
}

// One reference: its Python process, and its C++ rung timed again, paired with the reference's repetitions where
// both fit on the device (else after it). Returns rungs.json's entry.
nlohmann::json one_reference(const std::string& name, int64_t batch, int64_t runs_left, RungRunner& ladder,
                             const std::vector<RungRecord>& records, const nlohmann::json& refs, RunWriter& writer,
                             const std::string& out_dir) {
  nlohmann::json ref = {{"name", name}, {"config", reference_config(name, ladder.prof, ladder.dev, batch)}};
  const RungRecord* with = compared_rung(ref, records);  // compare_reference's, from the same config and rungs
  const RungRecord* pairs = with && fits_beside(*with, ladder.dev) ? with : nullptr;
  std::cerr << "[ref] " << name << " at batch " << batch << ": Python " << project_python()
            << (pairs ? ", paired with " + pairs->name() : "") << "\n";
  ladder.release();  // the Python process shares the device: what this one held, and holds still, is said
  const nlohmann::json held = ladder.held();
  if (ladder.clocks) {  // NVML while the Python process runs: the samples before it dropped
    ladder.clocks->take_samples();
    ladder.clocks->start();
  }
  Again a;
  const double share = ladder.budget.limited() ? ladder.budget.share_s(runs_left) : -1;
  ref = run_reference(name, ref["config"], ladder.data.train, out_dir, share,
                      pairs ? pair_with(*pairs, name, runs_left, ladder, a) : PairedTiming{});
  if (ladder.clocks) {
    if (!a.ref_samples) ladder.clocks->stop(), a.ref_samples = ladder.clocks->take_samples();
    attach_reference_clocks(ref, *a.ref_samples);
  }
  ref["cpp_process_held"] = held;
  if (g_signal && ref["status"] != "ok") {  // the stop reached the Python process too: not its failure
    ref["status"] = "interrupted", ref["error"] = "not finished: interrupted (--resume runs it again)";
    ref.erase("failure");
  }
  std::string why;  // at another batch the baseline's step there, which the C++ rungs there made already
  if (ref["status"] == "ok" && batch != ladder.prof.batch && ref["result"].contains("parity_losses") &&
      !ladder.baseline.losses.empty())
    ladder.reference_at(batch, static_cast<int64_t>(ref["result"]["parity_losses"].size()), why);
  compare_reference(ref, records, ladder.baseline, ladder.baseline_at);
  if (!why.empty() && ref.contains("parity"))
    ref["parity"]["rule"] = ref["parity"].value("rule", "") + "; not against the baseline at its batch: " + why;
  const bool paired = a.record.has_value();  // else its line first, while its rung is timed again after it
  if (!paired) std::cerr << reference_line(ref) << "\n";
  if (!paired && a.error.empty() && with && ref.contains("compared_with") && !g_signal)
    time_again_after(*with, name, runs_left, ladder, a);
  if (a.record) compare_again(ref, *a.record, a.python_step_s);
  if (paired) std::cerr << reference_line(ref) << "\n";
  if (!a.error.empty()) {
    ref["again"] = {{"rung", ref.value("compared_with", "")}, {"error", a.error}};
    auto with_this = refs;  // a lost device ends the process here: the reference's own figures kept
    with_this.push_back(ref);
    writer.set_references(with_this);
    lost_device_exit().check(a.error);
    ladder.release();
  }
  if (ref.contains("again")) std::cerr << again_line(ref) << "\n";
  return ref;
}

}  // namespace

void run_reference_rungs(const LadderOptions& o, RungRunner& ladder, const std::vector<RungRecord>& records,
                         RunWriter& writer) {
  const Profile& prof = ladder.prof;
  nlohmann::json refs = writer.references();  // --resume: those the earlier run finished, kept
  const auto selected = selected_references(o.rung_filter, prof);
  auto sb = searched_batch(records);
  if (sb == 0) sb.reset();  // batch_scaling's rung still pending after the ladder: --rung left it out
  const auto to_run = references_to_run(selected, prof.batch, sb, refs);
  for (const auto& t : references_to_run(selected, prof.batch, sb, nlohmann::json::array()))
    if (std::find(to_run.begin(), to_run.end(), t) == to_run.end())
      std::cerr << "[ref] " << t.first << " at batch " << t.second << ": kept from the earlier run\n";
  for (size_t i = 0; i < to_run.size() && !g_signal; ++i) {
    const auto runs_left = static_cast<int64_t>(2 * (to_run.size() - i));  // each reference, then its rung again
    refs.push_back(one_reference(to_run[i].first, to_run[i].second, runs_left, ladder, records, refs, writer, o.out_dir));
    writer.set_references(refs);
    writer.flush(records, "running");
  }
}

}  // namespace gpt2
