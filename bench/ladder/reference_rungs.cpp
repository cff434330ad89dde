#include "bench/ladder/reference_rungs.h"

#include <algorithm>
#include <iostream>

#include "bench/ladder/lost_device.h"
#include "bench/ladder/reference.h"
#include "bench/ladder/select.h"
#include "common/errors.h"
#include "common/python.h"

namespace gpt2 {

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
    const auto& [name, batch] = to_run[i];
    const auto runs_left = static_cast<int64_t>(2 * (to_run.size() - i));  // each reference, then its rung again
    const double share = ladder.budget.limited() ? ladder.budget.share_s(runs_left) : -1;
    std::cerr << "[ref] " << name << " at batch " << batch << ": Python " << project_python() << "\n";
    ladder.release();  // the Python process shares the device: what this one held, and holds still, is said
    const nlohmann::json held = ladder.held();
    if (ladder.clocks) {  // NVML while the Python process runs: the samples before it dropped
      ladder.clocks->take_samples();
      ladder.clocks->start();
    }
    nlohmann::json ref = run_reference(name, reference_config(name, prof, ladder.dev, batch), ladder.data.train,
                                       o.out_dir, share);
    if (ladder.clocks) {
      ladder.clocks->stop();
      attach_reference_clocks(ref, ladder.clocks->take_samples());
    }
    ref["cpp_process_held"] = held;
    if (g_signal && ref["status"] != "ok") {  // the stop reached the Python process too: not its failure
      ref["status"] = "interrupted", ref["error"] = "not finished: interrupted (--resume runs it again)";
      ref.erase("failure");
    }
    compare_reference(ref, records, ladder.baseline);
    std::cerr << reference_line(ref) << "\n";
    const auto with = std::find_if(records.begin(), records.end(), [&](const RungRecord& r) {
      return ref.contains("compared_with") && r.name() == ref["compared_with"].get<std::string>();
    });
    if (with != records.end() && !g_signal) {
      std::cerr << "[ref] " << with->name() << " timed again after " << name << ": build + " << ladder.warmup_steps()
                << " warm-up steps\n";
      try {
        compare_again(ref, ladder.retime(*with, ladder.budget.limited() ? ladder.budget.share_s(runs_left - 1) : INFINITY));
      } catch (const std::exception& e) {
        ref["again"] = {{"rung", with->name()}, {"error", error_text(e)}};
        auto with_this = refs;  // a lost device ends the process here: the reference's own figures kept
        with_this.push_back(ref);
        writer.set_references(with_this);
        lost_device_exit().check(error_text(e));
        ladder.release();
      }
      std::cerr << again_line(ref) << "\n";
    }
    refs.push_back(ref);
    writer.set_references(refs);
    writer.flush(records, "running");
  }
}

}  // namespace gpt2
