// The spread of a rung's repetitions: median with a distribution-free confidence interval, the ratio of two
// rungs with one, and the coefficient of variation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "bench/measure/stats.h"

namespace gpt2 {
namespace {

TEST(Stats, MedianIntervalFromOrderStatistics) {
  // n = 5: only the whole range reaches near 95% (1 - 2/32 = 93.75%).
  auto m = median_interval({5, 1, 4, 2, 3});
  EXPECT_EQ(m.median, 3);
  EXPECT_EQ(m.low, 1);
  EXPECT_EQ(m.high, 5);
  EXPECT_DOUBLE_EQ(m.level, 1 - 2.0 / 32);
  // n = 9 (the GPU profiles): [x(2), x(8)] covers 1 - 2·10/512 = 96.1%; [x(3), x(7)] only 82%.
  m = median_interval({10, 20, 30, 40, 50, 60, 70, 80, 90});
  EXPECT_EQ(m.median, 50);
  EXPECT_EQ(m.low, 20);
  EXPECT_EQ(m.high, 80);
  EXPECT_NEAR(m.level, 1 - 2 * 10.0 / 512, 1e-12);
  // Even n: the median between the middle two.
  m = median_interval({1, 2, 3, 4, 5, 6});
  EXPECT_EQ(m.median, 3.5);
  EXPECT_EQ(m.low, 1);
  EXPECT_EQ(m.high, 6);
  EXPECT_EQ(median_interval({}).n, 0);
}

TEST(Stats, RatioIntervalFromPairwiseRatios) {
  // n = m = 5: P(U <= 2) = 4/252 under no difference (U = 0, 1: one ordering each; U = 2: two), P(U <= 3)
  // = 7/252, so [D(3), D(23)] of the 25 sorted ratios covers 1 - 8/252 = 96.8% and [D(4), D(22)] only 94.4%.
  const std::vector<double> b = {100, 101, 102, 103, 104};
  std::vector<double> a;
  for (double x : b) a.push_back(2 * x);
  auto r = ratio_interval(a, b);
  EXPECT_NEAR(r.level, 1 - 8.0 / 252, 1e-12);
  EXPECT_NEAR(r.estimate, 2.0, 1e-12);  // the median pairwise ratio: 2x exactly, 200/100 ... 208/104
  std::vector<double> ratios;
  for (double x : a)
    for (double y : b) ratios.push_back(x / y);
  std::sort(ratios.begin(), ratios.end());
  EXPECT_DOUBLE_EQ(r.low, ratios[2]);
  EXPECT_DOUBLE_EQ(r.high, ratios[22]);
  EXPECT_LT(r.low, 2.0);
  EXPECT_GT(r.high, 2.0);
  // The other way round: the reciprocal.
  const auto back = ratio_interval(b, a);
  EXPECT_NEAR(back.estimate, 0.5, 1e-12);
  EXPECT_NEAR(back.low, 1 / r.high, 1e-12);
  EXPECT_NEAR(back.high, 1 / r.low, 1e-12);
  // Too few repetitions for 95%: every pairwise ratio, and what that covers (1 - 2/C(4, 2)).
  r = ratio_interval({3, 4}, {1, 2});
  EXPECT_DOUBLE_EQ(r.low, 1.5);
  EXPECT_DOUBLE_EQ(r.high, 4.0);
  EXPECT_NEAR(r.level, 1 - 2.0 / 6, 1e-12);
  EXPECT_EQ(ratio_interval({}, {1}).n, 0);
}

// What the interval promises: over many pairs of noisy samples (9 repetitions each, lognormal noise of 10%),
// it holds the true ratio at least as often as its level says.
TEST(Stats, RatioIntervalCoversTheTrueRatio) {
  std::mt19937 gen(7);
  std::normal_distribution<double> noise(0.0, 0.1);
  const double truth = 1.3;
  int covered = 0, trials = 2000;
  double level = 0;
  for (int t = 0; t < trials; ++t) {
    std::vector<double> a, b;
    for (int i = 0; i < 9; ++i) a.push_back(truth * 1000 * std::exp(noise(gen))), b.push_back(1000 * std::exp(noise(gen)));
    const auto r = ratio_interval(a, b);
    covered += r.low <= truth && truth <= r.high;
    level = r.level;
  }
  EXPECT_GE(level, 0.95);
  EXPECT_GT(double(covered) / trials, level - 0.015) << covered << " of " << trials;  // binomial sd ~0.005
  EXPECT_LT(double(covered) / trials, 0.995);  // an interval, not the whole line
}

TEST(Stats, CoefficientOfVariation) {
  EXPECT_DOUBLE_EQ(coefficient_of_variation({2, 4, 4, 4, 5, 5, 7, 9}), std::sqrt(32.0 / 7) / 5);
  EXPECT_EQ(coefficient_of_variation({3}), 0);
}

// A machine at half speed for half the pairs: both sides of a pair slow together, so the pairs' ratio stands, the
// movement says how far the machine moved, and only a movement past the difference is disturbed.
TEST(Stats, PairedRatioStandsWhenTheMachineSlowsBothSides) {
  const std::vector<double> a = {300, 310, 150, 152, 305, 149}, b = {200, 205, 101, 100, 202, 99};
  const PairedRatio p = paired_ratio(a, b);
  ASSERT_EQ(p.ratios.size(), 6u);
  EXPECT_NEAR(p.ratio.median, 1.5, 0.02);
  EXPECT_NEAR(p.movement, 2.0, 0.1);
  EXPECT_TRUE(disturbed(p));  // moved 2x, a 1.5x difference
  const PairedRatio big = paired_ratio({900, 930, 450, 456, 915, 447}, b);
  EXPECT_NEAR(big.ratio.median, 4.5, 0.1);
  EXPECT_FALSE(disturbed(big));  // 4.5x is beyond what a 2x movement could make
}

// Steady work beside a CPU run changes a ratio without moving its pairs (a busy 2-core machine: bf16's gain 2.33x,
// 1.95x quiet, its pairs moved 1.07x): a run that got under kBusyCoreShare of its cores is disturbed at any ratio.
TEST(Stats, ARatioTimedWhileOtherWorkTookTheCoresIsDisturbedHoweverLarge) {
  PairedRatio p = paired_ratio({2934, 3056, 2414, 3019, 3217}, {1161, 1363, 1497, 1296, 1301});
  EXPECT_LT(p.movement, kQuietMovement);
  EXPECT_FALSE(disturbed(p));  // the pairs alone cannot tell
  p.core_share = 0.6;
  EXPECT_TRUE(disturbed(p));
  p.core_share = 0.97;  // a quiet machine's share (ATen's threads spin while they wait)
  EXPECT_FALSE(disturbed(p));
}

TEST(Stats, OneOddPairIsNotTheMachineMoving) {
  const PairedRatio p = paired_ratio({100, 102, 99, 50, 101}, {100, 101, 100, 100, 99});
  EXPECT_LT(p.movement, 1.05);  // the one slow repetition trimmed
  EXPECT_FALSE(disturbed(p));
  EXPECT_EQ(paired_ratio({100, 50}, {100}).ratios.size(), 1u);  // pairs as far as both sides ran
  EXPECT_TRUE(paired_ratio({}, {1}).ratios.empty());
}

}  // namespace
}  // namespace gpt2
