// Prints the learning rate of every step of a schedule, one per line, for
// tests/lr_schedule_torch_test.sh to compare with PyTorch's schedulers.
//
//   lr_schedule_dump LR TOTAL_STEPS 'LrSchedule text format'
#include <cstdio>
#include <cstdlib>
#include <string>

#include "google/protobuf/text_format.h"
#include "proto/job.pb.h"
#include "worker/optim/lr_schedule.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s LR TOTAL_STEPS 'LrSchedule text'\n",
                 argv[0]);
    return 2;
  }
  cohort::OptimizerSpec opt;
  opt.set_lr(std::strtof(argv[1], nullptr));
  const long long total = std::strtoll(argv[2], nullptr, 10);
  cohort::LrSchedule schedule;
  if (total <= 0 ||
      !google::protobuf::TextFormat::ParseFromString(argv[3], &schedule)) {
    std::fprintf(stderr, "bad TOTAL_STEPS or schedule: %s %s\n", argv[2],
                 argv[3]);
    return 2;
  }
  for (long long step = 0; step < total; ++step) {
    std::printf("%.9g\n", cohort::LearningRate(opt, schedule, step, total));
  }
  return 0;
}
