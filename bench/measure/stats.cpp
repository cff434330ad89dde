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

// The Mann-Whitney statistic's null distribution for samples of n and m: P(U = u), u = 0..n·m. The
// largest of the n + m values is one of the n (U gains m) with probability n / (n + m), else one of the m.
std::vector<double> mann_whitney_null(int n, int m) {
  // row[j] holds the distribution for (i, j) as i goes 0..n
  std::vector<std::vector<double>> row(static_cast<size_t>(m) + 1, std::vector<double>{1.0});
  for (int i = 1; i <= n; ++i) {
    std::vector<double> prev{1.0};  // (i, 0): U = 0
    for (int j = 1; j <= m; ++j) {
      std::vector<double> cur(static_cast<size_t>(i) * j + 1, 0.0);
      const double pa = double(i) / (i + j);
      for (size_t u = 0; u < row[j].size(); ++u) cur[u + j] += pa * row[j][u];  // (i-1, j), shifted by j
      for (size_t u = 0; u < prev.size(); ++u) cur[u] += (1 - pa) * prev[u];    // (i, j-1)
      row[j - 1] = std::move(prev);
      prev = std::move(cur);
    }
    row[m] = std::move(prev);
  }
  return row[m];
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

PairedRatio paired_ratio(const std::vector<double>& a, const std::vector<double>& b) {
  PairedRatio p;
  const size_t n = std::min(a.size(), b.size());
  if (n == 0) return p;
  const std::vector<double> a_n(a.begin(), a.begin() + n), b_n(b.begin(), b.begin() + n);
  const double ma = median(a_n), mb = median(b_n);
  std::vector<double> speeds;
  for (size_t k = 0; k < n; ++k) {
    p.ratios.push_back(a_n[k] / b_n[k]);
    speeds.push_back(std::sqrt(a_n[k] / ma * (b_n[k] / mb)));  // tok/s: higher is faster
  }
  std::sort(speeds.begin(), speeds.end());
  const size_t trim = n >= 4 ? 1 : 0;  // one odd pair at either end is noise, not the machine
  p.ratio = median_interval(p.ratios);
  p.movement = speeds[n - 1 - trim] / speeds[trim];
  return p;
}

bool disturbed(const PairedRatio& p) {
  if (p.core_share < kBusyCoreShare) return true;
  return p.movement > kQuietMovement && std::log(p.movement) > std::abs(std::log(p.ratio.median));
}

RatioInterval ratio_interval(const std::vector<double>& a, const std::vector<double>& b, double level) {
  RatioInterval r;
  r.n = static_cast<int>(a.size());
  r.m = static_cast<int>(b.size());
  if (a.empty() || b.empty()) return r;
  std::vector<double> logs;
  for (double x : a)
    for (double y : b) logs.push_back(std::log(x / y));
  std::sort(logs.begin(), logs.end());
  r.estimate = std::exp(median(logs));
  const std::vector<double> p = mann_whitney_null(r.n, r.m);
  const size_t nm = logs.size();
  double below = p[0];  // P(U < k + 1) as k grows
  size_t k = 1;
  while (2 * (k + 1) <= nm && 1 - 2 * (below + p[k]) >= level) below += p[k++];
  r.low = std::exp(logs[k - 1]);
  r.high = std::exp(logs[nm - k]);
  r.level = 1 - 2 * below;
  return r;
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
