#include "worker/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "common/logging.h"

namespace cohort {
namespace {

constexpr double kPi = 3.14159265358979323846;

// A factor as the spec wrote it: the shortest decimal that reads back as
// the same float, in double. Raised to the thousandth power, the float's own
// rounding error (0.97f is 0.97000003) would grow a thousandfold. Called
// every step with the same factor, so the last answer is kept (per thread:
// the function stays pure to its callers).
double AsWritten(float f) {
  thread_local float last_in = 0;
  thread_local double last_out = 0;
  if (f == last_in) return last_out;
  char text[32];
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(text, sizeof(text), "%.*g", digits, f);
    if (std::strtof(text, nullptr) == f) break;
  }
  last_in = f;
  last_out = std::strtod(text, nullptr);
  return last_out;
}

// From `from` to `to` along half a cosine, at `pct` in [0, 1].
double CosineBetween(double from, double to, double pct) {
  return to + (from - to) / 2 * (std::cos(kPi * pct) + 1);
}

// PyTorch's two-phase OneCycleLR: up from base / div_factor to base over the
// first pct_start of the run, then down to that / final_div_factor at its
// last step.
double OneCycle(double base, const LrSchedule& s, int64_t step,
                int64_t total_steps) {
  CHECK_GT(total_steps, 0);
  const double pct_start = s.pct_start() > 0 ? s.pct_start() : 0.3;
  const double initial = base / (s.div_factor() > 0 ? s.div_factor() : 25.0);
  const double lowest =
      initial / (s.final_div_factor() > 0 ? s.final_div_factor() : 1e4);
  const double peak_step = pct_start * total_steps - 1;
  const double last_step = total_steps - 1;
  const double x = static_cast<double>(step);
  if (x <= peak_step) {
    return CosineBetween(initial, base, peak_step > 0 ? x / peak_step : 1.0);
  }
  const double span = last_step - peak_step;
  return CosineBetween(base, lowest, span > 0 ? (x - peak_step) / span : 1.0);
}

double Scheduled(double base, const LrSchedule& s, int64_t step,
                 int64_t total_steps) {
  switch (s.kind()) {
    case LrSchedule::STEP:
      CHECK_GT(s.step_size(), 0);
      return base * std::pow(AsWritten(s.gamma()),
                             static_cast<double>(step / s.step_size()));
    case LrSchedule::COSINE: {
      CHECK_GT(total_steps, 0);
      double min_lr = s.min_lr();
      double progress =
          static_cast<double>(std::min(step, total_steps)) / total_steps;
      return min_lr + (base - min_lr) * (1 + std::cos(kPi * progress)) / 2;
    }
    case LrSchedule::MULTI_STEP: {
      const auto& m = s.milestones();
      const int64_t passed =
          std::upper_bound(m.begin(), m.end(), step) - m.begin();
      return base * std::pow(AsWritten(s.gamma()), static_cast<double>(passed));
    }
    case LrSchedule::EXPONENTIAL:
      return base * std::pow(AsWritten(s.gamma()), static_cast<double>(step));
    case LrSchedule::ONE_CYCLE:
      return OneCycle(base, s, step, total_steps);
    case LrSchedule::POLYNOMIAL: {
      CHECK_GT(total_steps, 0);
      const double power = s.power() > 0 ? s.power() : 1.0;
      const double left =
          1.0 - static_cast<double>(std::min(step, total_steps)) / total_steps;
      return base * std::pow(left, power);
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
