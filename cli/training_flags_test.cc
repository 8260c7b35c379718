#include "cli/training_flags.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(TrainingFlags, EveryCommandRegistersTheSameNames) {
  for (TrainingCommand c :
       {TrainingCommand::kTrain, TrainingCommand::kLocal,
        TrainingCommand::kWorker, TrainingCommand::kLaunch}) {
    TrainingFlags f;
    FlagSet flags("x");
    f.Register(flags, c);
    const std::string usage = flags.Usage();
    for (const char* name : kTrainingFlagNames) {
      EXPECT_NE(usage.find(std::string("--") + name), std::string::npos)
          << name << " in\n"
          << usage;
    }
  }
}

TEST(TrainingFlags, ParsesAndAppliesToBothOptions) {
  TrainingFlags f;
  FlagSet flags("train");
  f.Register(flags, TrainingCommand::kTrain);
  ASSERT_TRUE(flags
                  .Parse({"--epochs=3", "--max-steps=0", "--checkpoint-dir=d",
                          "--init-from=w.safetensors", "--quiet"})
                  .ok());
  TrainOptions t;
  f.ApplyTo(&t);
  EXPECT_EQ(t.epochs, 3);
  EXPECT_EQ(t.max_steps, 0);
  EXPECT_EQ(t.checkpoint_dir, "d");
  EXPECT_EQ(t.init_from, "w.safetensors");
  EXPECT_TRUE(t.quiet);
  WorkerOptions w;
  f.ApplyTo(&w);
  EXPECT_EQ(w.epochs, 3);
  EXPECT_EQ(w.max_steps, 0);
  EXPECT_EQ(w.checkpoint_dir, "d");
  EXPECT_EQ(w.init_from, "w.safetensors");
}

TEST(TrainingFlags, MaxStepsTakesMinusOneButNoLess) {
  TrainingFlags f;
  FlagSet flags("train");
  f.Register(flags, TrainingCommand::kTrain);
  EXPECT_TRUE(flags.Parse({"--max-steps=-1"}).ok());
  EXPECT_FALSE(flags.Parse({"--max-steps=-2"}).ok());
}

TEST(TrainingFlags, WorkerArgsCarryWhatAWorkerHonours) {
  TrainingFlags f;
  EXPECT_TRUE(f.WorkerArgs().empty());
  f.epochs = 2;
  f.max_steps = 0;
  f.export_to = "m.onnx";
  f.report = "r.json";       // the coordinator's in cohort local
  f.metrics_listen = "h:1";  // likewise
  f.quiet = true;            // local's workers are always quiet
  EXPECT_EQ(f.WorkerArgs(),
            (std::vector<std::string>{"--epochs=2", "--max-steps=0",
                                      "--export=m.onnx"}));
}

TEST(TrainingFlags, ExportNeedsAKnownFormat) {
  TrainingFlags f;
  EXPECT_TRUE(f.Check().ok());
  f.export_to = "m.safetensors";
  EXPECT_EQ(f.ExportFormat(), "safetensors");
  EXPECT_TRUE(f.Check().ok());
  f.export_to = "m.pt";
  EXPECT_EQ(f.Check().message(),
            "--export must name a .onnx or .safetensors file, got m.pt");
}

}  // namespace
}  // namespace cohort
