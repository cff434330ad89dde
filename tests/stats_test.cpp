// The spread of a rung's repetitions: median with a distribution-free confidence interval, and the
// coefficient of variation, on fixed inputs.
#include <gtest/gtest.h>

#include <cmath>

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

TEST(Stats, CoefficientOfVariation) {
  EXPECT_DOUBLE_EQ(coefficient_of_variation({2, 4, 4, 4, 5, 5, 7, 9}), std::sqrt(32.0 / 7) / 5);
  EXPECT_EQ(coefficient_of_variation({3}), 0);
}

}  // namespace
}  // namespace gpt2
