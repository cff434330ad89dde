// defines: MedianInterval, median_interval, RatioInterval, ratio_interval, coefficient_of_variation — the
//          spread of a rung's repetitions and of a ratio of two rungs, for rungs.json. No libtorch.
#pragma once
#include <vector>

namespace gpt2 {

// The median with a distribution-free interval from order statistics, [x(k), x(n-k+1)], k the largest whose
// coverage 1 - 2·P(Binomial(n, 1/2) < k) is >= `level`; too few repetitions: the whole range, `level` its coverage.
struct MedianInterval {
  double median = 0, low = 0, high = 0;
  double level = 0;  // the coverage achieved
  int n = 0;
};
MedianInterval median_interval(std::vector<double> values, double level = 0.95);

// How many times faster `a` is than `b` (independent repetitions): the Hodges-Lehmann estimate (median pairwise
// ratio) with the Mann-Whitney interval [D(k), D(nm-k+1)] of the sorted ratios (Bauer 1972; R's wilcox.test), k
// as median_interval's. A ratio of medians says nothing of how far noise alone could move it.
struct RatioInterval {
  double estimate = 0, low = 0, high = 0;
  double level = 0;  // the coverage achieved
  int n = 0, m = 0;
};
RatioInterval ratio_interval(const std::vector<double>& a, const std::vector<double>& b, double level = 0.95);
double median(std::vector<double> values);

// A ratio timed in pairs: repetition k of `a` run right beside repetition k of `b` (tok/s each), so that a change
// in the machine's speed slows both. The ratio is the median of the pairs' a_k / b_k, with median_interval's
// interval. `movement`: how far the machine itself moved while the two were timed, the second-fastest pair's speed
// over the second-slowest's (with 4 pairs or more; else the extremes), a pair's speed being the geometric mean of
// its two sides' tok/s over their medians.
struct PairedRatio {
  MedianInterval ratio;
  std::vector<double> ratios;
  double movement = 1;
  double core_share = 1;  // on a CPU, the median share of its cores the run got (below kBusyCoreShare: others ran)
};
PairedRatio paired_ratio(const std::vector<double>& a, const std::vector<double>& b);
// What a quiet machine's pairs move by (docs/measurement.md: Pairs): past it, and past the ratio's own distance
// from 1, the machine moved more than the difference measured, and the ratio is not claimed.
constexpr double kQuietMovement = 1.5;
// A CPU run that got less of its cores than this while a rung's pairs ran shared the machine with other work, which
// changes a ratio however steady it is (a busy 2-core machine: bf16's gain 2.33x, 1.95x quiet): not claimed.
constexpr double kBusyCoreShare = 0.8;
bool disturbed(const PairedRatio& p);  // 0 for none; the mean of the middle two for an even count
// Sample standard deviation over the mean (0 with fewer than 2 values).
double coefficient_of_variation(const std::vector<double>& values);

}  // namespace gpt2
