// Learning-rate schedules: the learning rate of each optimizer step.
//
// Steps count from 0. With base = opt.lr:
//   CONSTANT  base
//   STEP      base * gamma^(step / step_size)           (integer division)
//   COSINE    min_lr + (base - min_lr) * (1 + cos(pi * step / total)) / 2,
//             and min_lr once step >= total
//   MULTI_STEP   base * gamma^(milestones <= step)
//   EXPONENTIAL  base * gamma^step
//   ONE_CYCLE    PyTorch's OneCycleLR (two phases, cosine annealing): from
//                base / div_factor up to base at pct_start * total - 1, then
//                down to base / div_factor / final_div_factor at total - 1
//   POLYNOMIAL   base * (1 - min(step, total) / total)^power
// (the last four exactly as PyTorch 1.13's schedulers of those names, one
// scheduler step per optimizer step)
// and, for any kind, a linear warm-up that scales the value above by
// (step + 1) / warmup_steps while step < warmup_steps, so the first step
// already moves and the warm-up ends exactly at the scheduled value.
//
// Thread safety: pure functions.
#ifndef COHORT_WORKER_OPTIM_LR_SCHEDULE_H_
#define COHORT_WORKER_OPTIM_LR_SCHEDULE_H_

#include <cstdint>

#include "proto/job.pb.h"

namespace cohort {

// The learning rate of step `step` (>= 0) of a run of `total_steps` steps
// (> 0; COSINE, ONE_CYCLE and POLYNOMIAL use it). `opt` and `s` must be valid
// (ParseJobSpec).
double LearningRate(const OptimizerSpec& opt, const LrSchedule& s, int64_t step,
                    int64_t total_steps);

}  // namespace cohort

#endif  // COHORT_WORKER_OPTIM_LR_SCHEDULE_H_
