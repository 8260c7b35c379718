// Model::SetTrace: every layer's training-mode Forward and Backward, and
// those of the layers inside residual blocks and branches, reported under
// their parameters' position names, nested like brackets; nothing in
// evaluation or after the trace is taken away.
#include "worker/layers/layer_trace.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "worker/layers/activation.h"
#include "worker/layers/batchnorm.h"
#include "worker/layers/branch.h"
#include "worker/layers/conv.h"
#include "worker/layers/residual.h"
#include "worker/model.h"

namespace cohort {
namespace {

// Records each call as "F <name>" or "B <name>" in the order calls end,
// and the deepest nesting seen.
class RecordingTrace final : public LayerTrace {
 public:
  void Begin() override {
    ++open_;
    deepest_ = std::max(deepest_, open_);
  }
  void End(const std::string& name, bool backward) override {
    ASSERT_GT(open_, 0) << "End without Begin: " << name;
    --open_;
    calls_.push_back((backward ? "B " : "F ") + name);
  }
  const std::vector<std::string>& calls() const { return calls_; }
  int open() const { return open_; }
  int deepest() const { return deepest_; }
  void Clear() { calls_.clear(); }

 private:
  std::vector<std::string> calls_;
  int open_ = 0, deepest_ = 0;
};

std::unique_ptr<Layer<float>> Conv(int64_t out, int64_t kernel,
                                   int64_t padding) {
  ConvOptions o;
  o.out_channels = out;
  o.kernel = kernel;
  o.padding = padding;
  return std::make_unique<Conv2d<float>>(o);
}

// conv, a residual block with a downsample, a branch of two paths.
std::unique_ptr<Model<float>> SmallModel() {
  Model<float>::LayerList layers;
  layers.push_back(Conv(8, 3, 1));
  auto block = std::make_unique<BasicBlock<float>>(16, 2);
  block->set_channel_blocked(false);
  layers.push_back(std::move(block));
  std::vector<Branch<float>::Path> paths(2);
  paths[0].push_back(Conv(16, 1, 0));
  paths[0].push_back(std::make_unique<ReLU<float>>());
  paths[1].push_back(std::make_unique<BatchNorm2d<float>>());
  layers.push_back(
      std::make_unique<Branch<float>>(std::move(paths), BranchCombine::kSum));
  auto model = Model<float>::Create(std::move(layers), {3, 8, 8});
  EXPECT_TRUE(model.ok()) << model.status();
  (*model)->InitializeParameters(3);
  return *std::move(model);
}

bool Has(const std::vector<std::string>& calls, const std::string& prefix) {
  for (const std::string& c : calls) {
    if (c.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

TEST(LayerTrace, ReportsEveryLayerOfATrainingStepNested) {
  auto model = SmallModel();
  RecordingTrace trace;
  model->SetTrace(&trace);
  Tensor x({3, 4, 8, 8});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = 0.01f * (i % 97);
  const Tensor& y = model->Forward(x, Mode::kTrain);
  Tensor dy(y.shape());
  for (int64_t i = 0; i < dy.size(); ++i) dy[i] = 1.0f;
  model->Backward(dy);
  EXPECT_EQ(trace.open(), 0);
  EXPECT_EQ(trace.deepest(), 2);  // a block's layers inside the block
  const std::vector<std::string>& calls = trace.calls();
  for (const char* want :
       {"F 0 conv2d(", "F 1.conv1 conv2d(", "F 1.bn1 ", "F 1.conv2 ",
        "F 1.downsample.0 conv2d(", "F 1.downsample.1 batchnorm2d(",
        "F 1 basic_block(", "F 2.paths.0.0 conv2d(", "F 2.paths.1.0 ",
        "F 2 branch(", "B 0 conv2d(", "B 1.conv1 ", "B 1.downsample.0 ",
        "B 1 basic_block(", "B 2.paths.0.0 ", "B 2 branch("}) {
    EXPECT_TRUE(Has(calls, want)) << "no call " << want;
  }
  // A container's call ends after its layers': the block's forward after
  // its last layer's, and the model's backward last on layer 0.
  auto index = [&](const std::string& prefix) {
    for (size_t i = 0; i < calls.size(); ++i) {
      if (calls[i].rfind(prefix, 0) == 0) return static_cast<int>(i);
    }
    return -1;
  };
  EXPECT_LT(index("F 1.conv2 "), index("F 1 basic_block("));
  EXPECT_LT(index("F 2.paths.0.0 "), index("F 2 branch("));
  EXPECT_EQ(calls.back().rfind("B 0 conv2d(", 0), 0u) << calls.back();
}

TEST(LayerTrace, EvaluationAndAClearedTraceReportNothing) {
  auto model = SmallModel();
  RecordingTrace trace;
  model->SetTrace(&trace);
  Tensor x({3, 2, 8, 8});
  model->Forward(x, Mode::kEval);
  EXPECT_TRUE(trace.calls().empty()) << trace.calls().front();
  model->SetTrace(nullptr);
  const Tensor& y = model->Forward(x, Mode::kTrain);
  model->Backward(Tensor(y.shape()));
  EXPECT_TRUE(trace.calls().empty()) << trace.calls().front();
}

}  // namespace
}  // namespace cohort
