// Step figures from a rank's activity log: steps by marks, and compute, communication and the
// communication no kernel hid, each checked against sums done by hand.
#include <gtest/gtest.h>

#include "step_figures.h"

namespace fakegpu::coord {
namespace {

using wire::ActivityKind;
using wire::ActivitySlice;

ActivitySlice slice(ActivityKind kind, double start, double end, uint64_t track = 1) {
  return {track, start, end, 1, kind};
}
ActivitySlice mark(ActivityKind kind, double at) { return {1, at, at, 1, kind}; }

TEST(StepFigures, OptimizerStepsSplitTheRunAndOverlapIsNotExposed) {
  // Step 1 [0, 100]: kernels 0-60, an all-reduce 40-90 on another stream (20 us behind kernels).
  // Step 2 [100, 250]: kernels 100-200 and 210-240, an all-reduce 190-230 (20 us exposed).
  std::vector<ActivitySlice> log = {
      slice(ActivityKind::kKernel, 0, 60),       slice(ActivityKind::kCollective, 40, 90, 2),
      mark(ActivityKind::kStepEnd, 100),         slice(ActivityKind::kKernel, 100, 200),
      slice(ActivityKind::kCopy, 200, 205),      slice(ActivityKind::kCollective, 190, 230, 2),
      slice(ActivityKind::kKernel, 210, 240),    mark(ActivityKind::kStepEnd, 250),
  };
  RankSteps steps = step_figures(log);
  EXPECT_EQ(steps.marks, StepMarks::kEnds);
  ASSERT_EQ(steps.steps.size(), 2u);
  const StepFigures& a = steps.steps[0];
  EXPECT_DOUBLE_EQ(a.start_us, 0);
  EXPECT_DOUBLE_EQ(a.time_us(), 100);
  EXPECT_DOUBLE_EQ(a.compute_us, 60);
  EXPECT_DOUBLE_EQ(a.comm_us, 50);
  EXPECT_DOUBLE_EQ(a.exposed_comm_us, 30);
  const StepFigures& b = steps.steps[1];
  EXPECT_DOUBLE_EQ(b.start_us, 100);
  EXPECT_DOUBLE_EQ(b.time_us(), 150);
  EXPECT_DOUBLE_EQ(b.compute_us, 130) << "copies are not compute";
  EXPECT_DOUBLE_EQ(b.comm_us, 40);
  EXPECT_DOUBLE_EQ(b.exposed_comm_us, 10);
}

TEST(StepFigures, WorkCrossingAStepBoundaryCountsInEachStepForItsPart) {
  std::vector<ActivitySlice> log = {slice(ActivityKind::kCollective, 80, 130), mark(ActivityKind::kStepEnd, 100),
                                    mark(ActivityKind::kStepEnd, 200)};
  RankSteps steps = step_figures(log);
  ASSERT_EQ(steps.steps.size(), 2u);
  EXPECT_DOUBLE_EQ(steps.steps[0].comm_us, 20);
  EXPECT_DOUBLE_EQ(steps.steps[1].comm_us, 30);
  EXPECT_DOUBLE_EQ(steps.steps[1].exposed_comm_us, 30);
}

TEST(StepFigures, RangesAreStepsAndTimeOutsideThemIsNot) {
  std::vector<ActivitySlice> log = {
      slice(ActivityKind::kKernel, 0, 50),  // warm-up, before any range
      mark(ActivityKind::kStepBegin, 50),  slice(ActivityKind::kKernel, 50, 80), mark(ActivityKind::kStepEnd, 90),
      mark(ActivityKind::kStepBegin, 90),  slice(ActivityKind::kKernel, 90, 100), mark(ActivityKind::kStepEnd, 120),
      mark(ActivityKind::kStepEnd, 130),   // an end with no open range: ignored
  };
  RankSteps steps = step_figures(log);
  EXPECT_EQ(steps.marks, StepMarks::kRanges);
  ASSERT_EQ(steps.steps.size(), 2u);
  EXPECT_DOUBLE_EQ(steps.steps[0].start_us, 50);
  EXPECT_DOUBLE_EQ(steps.steps[0].time_us(), 40);
  EXPECT_DOUBLE_EQ(steps.steps[0].compute_us, 30);
  EXPECT_DOUBLE_EQ(steps.steps[1].start_us, 90) << "a range may begin where the last one ended";
  EXPECT_DOUBLE_EQ(steps.steps[1].time_us(), 30);
  EXPECT_DOUBLE_EQ(steps.steps[1].compute_us, 10);
}

TEST(StepFigures, WithoutMarksTheWholeRunIsOneStep) {
  RankSteps steps = step_figures({slice(ActivityKind::kKernel, 10, 20), slice(ActivityKind::kCollective, 20, 70)});
  EXPECT_EQ(steps.marks, StepMarks::kNone);
  ASSERT_EQ(steps.steps.size(), 1u);
  EXPECT_DOUBLE_EQ(steps.steps[0].time_us(), 70);
  EXPECT_DOUBLE_EQ(steps.steps[0].exposed_comm_us, 50);
  EXPECT_TRUE(step_figures({}).steps.empty());
}

}  // namespace
}  // namespace fakegpu::coord
