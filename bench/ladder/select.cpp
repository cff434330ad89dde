#include "bench/ladder/select.h"

#include <algorithm>
#include <stdexcept>

#include "bench/ladder/reference.h"
#include "common/posix_regex.h"

namespace gpt2 {
namespace {

// Our filter alone decides: only the selected rungs are registered with Google Benchmark, whose own filter (matched
// against ".../iterations:1/repeats:5/manual_time") would read an anchored regex differently. POSIX extended
// regular expressions (glibc's: no backtracking, no exponential time) of at most kMaxRungFilter characters.
constexpr size_t kMaxRungFilter = 1000;

class RungRegex {
 public:
  explicit RungRegex(const std::string& filter) : re_(checked(filter), "--rung") {}
  bool found_in(const std::string& s) const { return re_.found_in(s); }

 private:
  static std::string checked(const std::string& filter) {  // the pattern, a leading '-' (negation) dropped
    if (filter.size() > kMaxRungFilter)
      throw std::invalid_argument("--rung takes a pattern of at most " + std::to_string(kMaxRungFilter) +
                               " characters (this one has " + std::to_string(filter.size()) + ")");
    return filter[0] == '-' ? filter.substr(1) : filter;
  }
  PosixRegex re_;
};

bool name_selected(const std::string& filter, const std::string& name, const std::string& benchmark_name) {
  if (filter.empty()) return true;
  const RungRegex re(filter);
  return (re.found_in(name) || re.found_in(benchmark_name)) != (filter[0] == '-');
}

}  // namespace

bool rung_selected(const std::string& filter, const RungRecord& r) {
  return r.out.status == RungStatus::kPending && name_selected(filter, r.plan.rung.name, r.plan.benchmark_name);
}

std::vector<std::string> selected_references(const std::string& filter, const Profile& prof) {
  std::vector<std::string> out;
  for (const auto& n : prof.references)
    if (name_selected(filter, n, prof.model.preset + "/" + n)) out.push_back(n);
  return out;
}

int64_t check_rung_filter(const std::string& filter, const std::vector<RungRecord>& records, const Profile& prof) {
  if (!filter.empty()) RungRegex{filter};
  std::string names;
  int64_t selected = static_cast<int64_t>(selected_references(filter, prof).size());
  for (const auto& r : records) {
    selected += rung_selected(filter, r);
    names += (names.empty() ? "" : ", ") + r.plan.rung.name;
  }
  for (const auto& n : prof.references) names += ", " + n;
  if (selected == 0 && !filter.empty())
    throw std::runtime_error("--rung '" + filter + "' matches no rung to run (rungs: " + names + ")");
  return selected;
}

std::optional<int64_t> searched_batch(const std::vector<RungRecord>& records) {
  const auto it = std::find_if(records.begin(), records.end(),
                               [](const RungRecord& r) { return r.plan.rung.spec.search_batch; });
  if (it == records.end() || ranks(it->spec()) != 1) return std::nullopt;
  if (it->ok()) return it->spec().batch;
  return it->out.status == RungStatus::kPending ? std::optional<int64_t>(0) : std::nullopt;
}

int64_t runs_to_make(const std::string& filter, const Profile& prof, const std::vector<RungRecord>& records,
                     const nlohmann::json& kept_references) {
  int64_t rungs = 0;
  for (const auto& r : records)
    if (rung_selected(filter, r)) rungs += r.budget_shares();
  return rungs + 2 * static_cast<int64_t>(references_to_run(selected_references(filter, prof), prof.batch,
                                                            searched_batch(records), kept_references)
                                              .size());  // each reference, and its C++ rung timed again
}

}  // namespace gpt2
