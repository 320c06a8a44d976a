// A rank's training steps on the modeled clock, from its activity log (wire::RankActivity):
// how long each step took, how much of it the GPU computed, how much it communicated, and how
// much of that communication no computation hid. Pure: slices in, figures out.
#pragma once

#include <string>
#include <vector>

#include "wire.h"

namespace fakegpu::coord {

struct StepFigures {
  double start_us = 0, end_us = 0;
  double compute_us = 0;       // kernels running on any stream
  double comm_us = 0;          // NCCL operations running (waiting for peers included)
  double exposed_comm_us = 0;  // communication while no kernel ran
  double time_us() const { return end_us - start_us; }
};

// How the program marked its steps (fakegpu's Python hook marks optimizer steps, or NVTX ranges
// named for steps).
enum class StepMarks {
  kRanges,  // begin and end marks (NVTX ranges): each range is a step
  kEnds,    // end marks only (optimizer steps): each step runs from the previous end, or from 0
  kNone,    // no marks: the whole run is one step, up to the last slice
};
const char* step_marks_name(StepMarks marks);

struct RankSteps {
  StepMarks marks = StepMarks::kNone;
  std::vector<StepFigures> steps;
};

RankSteps step_figures(const std::vector<wire::ActivitySlice>& slices);

}  // namespace fakegpu::coord
