#include "bench/measure/stats.h"

#include <algorithm>
#include <cmath>

namespace gpt2 {

namespace {
// P(Binomial(n, 1/2) < k)
double binomial_below(int n, int k) {
  double p = 0, c = 1;  // C(n, 0)
  for (int i = 0; i < k; ++i) {
    p += c;
    c = c * (n - i) / (i + 1);
  }
  return p * std::pow(0.5, n);
}
}  // namespace

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

MedianInterval median_interval(std::vector<double> v, double level) {
  MedianInterval m;
  m.n = static_cast<int>(v.size());
  if (v.empty()) return m;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  m.median = median(v);
  int k = 1;
  while (2 * (k + 1) <= static_cast<int>(n) && 1 - 2 * binomial_below(m.n, k + 1) >= level) ++k;
  m.low = v[k - 1];
  m.high = v[n - k];
  m.level = 1 - 2 * binomial_below(m.n, k);
  return m;
}

double coefficient_of_variation(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  double mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return mean != 0 ? std::sqrt(ss / static_cast<double>(v.size() - 1)) / mean : 0;
}

}  // namespace gpt2
