// defines: MedianInterval, median_interval, RatioInterval, ratio_interval, coefficient_of_variation — the
//          spread of a rung's repetitions and of a ratio of two rungs, for rungs.json. No libtorch.
#pragma once
#include <vector>

namespace gpt2 {

// The median with a distribution-free confidence interval from order statistics: [x(k), x(n-k+1)]
// of the sorted repetitions covers the true median with probability 1 - 2·P(Binomial(n, 1/2) < k).
// k is the largest with coverage >= `level`; with too few repetitions for that (n <= 5 at 95%) it
// is the whole range, and `level` says what it covers (n = 5: 93.75%).
struct MedianInterval {
  double median = 0, low = 0, high = 0;
  double level = 0;  // the coverage achieved
  int n = 0;
};
MedianInterval median_interval(std::vector<double> values, double level = 0.95);

// How many times faster sample `a` is than `b` (two independent sets of repetitions, e.g. tok/s),
// with a distribution-free confidence interval: the Hodges-Lehmann estimate on the log scale (the
// median of the n·m pairwise ratios a_i / b_j) and [D(k), D(nm-k+1)] of the sorted pairwise ratios,
// covering the true ratio with probability 1 - 2·P(U < k), U the Mann-Whitney statistic under no
// difference (Bauer 1972; R's wilcox.test(conf.int = TRUE)). As median_interval: k is the largest
// with coverage >= `level`; with too few repetitions it is every pairwise ratio, and `level` says
// what that covers. A ratio of medians says nothing about how far noise alone could move it.
struct RatioInterval {
  double estimate = 0, low = 0, high = 0;
  double level = 0;  // the coverage achieved
  int n = 0, m = 0;
};
RatioInterval ratio_interval(const std::vector<double>& a, const std::vector<double>& b, double level = 0.95);
double median(std::vector<double> values);  // 0 for none; the mean of the middle two for an even count
// Sample standard deviation over the mean (0 with fewer than 2 values).
double coefficient_of_variation(const std::vector<double>& values);

}  // namespace gpt2
