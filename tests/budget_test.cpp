// The ladder's time budget (bench/ladder/budget.h): what a rung takes for a given share and step
// time, and the share and progress line from a fake clock. The numbers are from the cpu-mini ladder
// on a CPU without native bf16, where a bf16 step at batch 16 took 4-6 s and fp32 steps 0.1 s.
#include <gtest/gtest.h>

#include "bench/ladder/budget.h"

namespace gpt2 {
namespace {

const RungCost kCpuMini{5, 3, 5, 2, 2};  // 5 repetitions of up to 3 steps, parity 5, breakdown 2 (+2 warm-up)

TEST(Budget, AFastRungTakesTheProfilesSteps) {
  const RungFit f = fit_rung(50.0, 0.1, kCpuMini);  // 500 step times of room
  EXPECT_EQ(f.steps, 3);
  EXPECT_TRUE(f.breakdown);
}

TEST(Budget, ASlowRungTakesWhatFitsItsShare) {
  // 60 s at 2 s a step = 30 steps: parity 5, breakdown 2 + 2*2 + 1 = 7, leaves 18 = 5 reps x 3 (max 3)
  EXPECT_EQ(fit_rung(60.0, 2.0, kCpuMini).steps, 3);
  // 40 s = 20 steps: 20 - 5 - 7 = 8 -> 1 step per repetition, with the breakdown pass
  RungFit f = fit_rung(40.0, 2.0, kCpuMini);
  EXPECT_EQ(f.steps, 1);
  EXPECT_TRUE(f.breakdown);
  // 30 s = 15 steps: with the breakdown pass nothing fits; without it 15 - 5 = 10 -> 2 a repetition
  f = fit_rung(30.0, 2.0, kCpuMini);
  EXPECT_EQ(f.steps, 2);
  EXPECT_FALSE(f.breakdown);
}

TEST(Budget, TheFloorIsOneStepARepetitionEvenOverTheShare) {
  const RungFit f = fit_rung(5.0, 6.0, kCpuMini);
  EXPECT_EQ(f.steps, 1);
  EXPECT_FALSE(f.breakdown);
  EXPECT_EQ(fit_rung(-3.0, 6.0, kCpuMini).steps, 1);  // a share already spent on build and warm-up
  EXPECT_EQ(f.parity_steps, 2);                         // 5 repetitions leave no room: the parity floor
  EXPECT_EQ(kCpuMini.floor_steps(), 5 + 2);
}

// Past one step a repetition, the parity run gets shorter, never below 2 steps (the forward at the
// seed's weights, one update): an emulated-bf16 rung at 6 s a step had a 72 s floor with 5.
TEST(Budget, ParityStepsAreCutLastDownToTwo) {
  EXPECT_EQ(fit_rung(30.0, 3.0, kCpuMini).parity_steps, 5);  // 10 steps: 5 x 1 + 5 parity fit
  EXPECT_EQ(fit_rung(24.0, 3.0, kCpuMini).parity_steps, 3);  // 8 steps: 5 x 1 + 3
  EXPECT_EQ(fit_rung(24.0, 3.0, kCpuMini).steps, 1);
  EXPECT_EQ(fit_rung(60.0, 2.0, kCpuMini).parity_steps, 5);  // no pressure: the profile's
  RungCost one = kCpuMini;
  one.parity_steps = 1;
  EXPECT_EQ(fit_rung(1.0, 6.0, one).parity_steps, 1);  // never more than the profile asks
}

TEST(Budget, NoBreakdownPassNothingToDrop) {
  RungCost c = kCpuMini;
  c.breakdown_steps = 0;
  EXPECT_TRUE(fit_rung(1.0, 6.0, c).breakdown);
}

// A kept rung is what the references are held against: its breakdown pass, which sets the two side by side by kind
// of work, stays at the floor (the H100 run of 2026-11-27 dropped 23_top+kept's at batch 128), the rest made room.
TEST(Budget, AKeptRungKeepsItsBreakdownPass) {
  RungCost kept = kCpuMini;
  kept.keep_breakdown = true;
  RungFit f = fit_rung(30.0, 2.0, kept);  // 15 steps: 7 for the pass, 5 parity, 3 left -> 1 a repetition
  EXPECT_TRUE(f.breakdown);
  EXPECT_EQ(f.steps, 1);
  EXPECT_EQ(f.parity_steps, 3);  // 15 - 7 - 5 x 1 = 3
  f = fit_rung(5.0, 6.0, kept);
  EXPECT_TRUE(f.breakdown);
  EXPECT_EQ(f.parity_steps, 2);  // the floor
  EXPECT_EQ(fit_rung(40.0, 2.0, kept).steps, fit_rung(40.0, 2.0, kCpuMini).steps);  // no pressure, no change
}

TEST(Budget, SharesAndProgressFromTheClock) {
  double now = 100.0;
  TimeBudget b(900.0, [&] { return now; });
  ASSERT_TRUE(b.limited());
  EXPECT_DOUBLE_EQ(b.share_s(18), 50.0);
  now += 300;  // 5 rungs in 5 minutes
  EXPECT_DOUBLE_EQ(b.share_s(13), 600.0 / 13);
  EXPECT_EQ(b.progress(5, 18), "5/18 rungs, 5m00s elapsed, about 10m00s left (budget 15m00s)");
  now += 590;
  EXPECT_EQ(b.progress(17, 18), "17/18 rungs, 14m50s elapsed, about 10s left (budget 15m00s)");
  EXPECT_EQ(b.progress(18, 18), "18/18 rungs, 14m50s elapsed");
  now += 100;
  EXPECT_DOUBLE_EQ(b.share_s(1), 0.0);  // over the budget: the rest run at the floor

  // The rungs left at the last rung's pace where it is slower than the average: after four 10 s rungs
  // a 60 s one (the batch grew) says 5 × 60 s, not 5 × 20 s; a fast one after it, the average.
  TimeBudget ladder(1800, [&] { return now; });
  now += 40;
  EXPECT_EQ(ladder.progress(4, 10), "4/10 rungs, 40s elapsed, about 1m00s left (budget 30m00s)");
  now += 60;
  EXPECT_EQ(ladder.progress(5, 10), "5/10 rungs, 1m40s elapsed, about 5m00s left (budget 30m00s)");
  now += 2;
  EXPECT_EQ(ladder.progress(6, 10), "6/10 rungs, 1m42s elapsed, about 1m08s left (budget 30m00s)");

  // Rungs at their floor do not shrink with the budget (the 2-core AMD EPYC Zen 3, bf16 emulated, cpu-mini: 90 s
  // rungs on 37 s shares, 27 minutes of a 15-minute budget): past twice their share, the rest at their pace, and
  // said; a budget spent is never "about 0s left" while rungs remain.
  TimeBudget floor(900, [&] { return now; });
  const double t0 = now;
  now = t0 + 53;
  EXPECT_EQ(floor.progress(3, 26), "3/26 rungs, 53s elapsed, about 6m46s left (budget 15m00s)");
  now = t0 + 143;  // the first bf16 rung: 90 s on a share of (900 - 53) / 23 = 37 s
  EXPECT_EQ(floor.progress(4, 26), "4/26 rungs, 2m23s elapsed, about 33m00s left: past the 15m00s budget, the rungs at their floor");
  now = t0 + 233;  // the next, as slow
  EXPECT_EQ(floor.progress(5, 26), "5/26 rungs, 3m53s elapsed, about 31m30s left: past the 15m00s budget, the rungs at their floor");
  now = t0 + 967;  // the budget spent
  EXPECT_EQ(floor.progress(13, 26), "13/26 rungs, 16m07s elapsed, about 19m53s left: past the 15m00s budget, the rungs at their floor");
  now = t0 + 968;  // a rung skipped at once after it: still past the budget, at the run's average pace
  EXPECT_EQ(floor.progress(14, 26), "14/26 rungs, 16m08s elapsed, about 13m50s left: past the 15m00s budget, the rungs at their floor");

  TimeBudget none(0, [&] { return now; });
  EXPECT_FALSE(none.limited());
  EXPECT_EQ(none.progress(1, 4), "1/4 rungs, 0s elapsed, about 0s left");
  EXPECT_EQ(format_duration(3725), "1h02m");
  // a step time keeps its digits under 10 s (a 258 ms step was "0s a step")
  EXPECT_EQ(format_duration(0.258), "258ms");
  EXPECT_EQ(format_duration(0.0001), "1ms");
  EXPECT_EQ(format_duration(4.74), "4.7s");
  EXPECT_EQ(format_duration(9.96), "10s");
  EXPECT_EQ(format_duration(-1), "0s");
}

}  // namespace
}  // namespace gpt2
