#include "worker/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "common/logging.h"

namespace cohort {
namespace {

constexpr double kPi = 3.14159265358979323846;

double Scheduled(double base, const LrSchedule& s, int64_t step,
                 int64_t total_steps) {
  switch (s.kind()) {
    case LrSchedule::STEP:
      CHECK_GT(s.step_size(), 0);
      return base * std::pow(static_cast<double>(s.gamma()),
                             static_cast<double>(step / s.step_size()));
    case LrSchedule::COSINE: {
      CHECK_GT(total_steps, 0);
      double min_lr = s.min_lr();
      double progress =
          static_cast<double>(std::min(step, total_steps)) / total_steps;
      return min_lr + (base - min_lr) * (1 + std::cos(kPi * progress)) / 2;
    }
    default:
      return base;
  }
}

}  // namespace

double LearningRate(const OptimizerSpec& opt, const LrSchedule& s, int64_t step,
                    int64_t total_steps) {
  CHECK_GE(step, 0);
  double lr = Scheduled(opt.lr(), s, step, total_steps);
  if (step < s.warmup_steps()) {
    lr *= static_cast<double>(step + 1) / static_cast<double>(s.warmup_steps());
  }
  return lr;
}

}  // namespace cohort
