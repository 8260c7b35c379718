#include "worker/predict.h"

#include <memory>
#include <vector>

#include "common/spec.h"
#include "gtest/gtest.h"
#include "worker/compute_threads.h"
#include "worker/zoo.h"

namespace cohort {
namespace {

// A small convolutional network with batch norms (whose statistics each
// copy of the model must carry) and a pool, on 16-channel blocks where
// oneDNN runs.
constexpr char kSpec[] = R"(
model {
  layers { conv2d { out_channels: 16 kernel: 3 padding: 1 } }
  layers { batchnorm2d {} } layers { relu {} }
  layers { maxpool2d { kernel: 3 stride: 2 padding: 1 } }
  layers { conv2d { out_channels: 32 kernel: 3 padding: 1 } }
  layers { batchnorm2d {} } layers { relu {} }
  layers { global_avgpool {} } layers { linear { out_features: 5 } }
}
data { kind: SYNTHETIC synthetic { shape: [3, 12, 12] classes: 5 } }
batch_size: 4
epochs: 1
optimizer { lr: 0.1 }
)";

TrainedModel MakeTrained() {
  TrainedModel t;
  absl::StatusOr<JobSpec> spec = ParseJobSpec(kSpec, "spec");
  EXPECT_TRUE(spec.ok()) << spec.status();
  t.spec = *spec;
  t.input_shape = {3, 12, 12};
  absl::StatusOr<std::unique_ptr<Model<float>>> m =
      BuildModel<float>(t.spec.model(), t.input_shape, /*seed=*/7);
  EXPECT_TRUE(m.ok()) << m.status();
  t.model = std::move(*m);
  // Statistics unlike the initial ones, so a copy without them differs.
  int k = 0;
  for (Tensor* b : t.model->Buffers()) {
    for (int64_t i = 0; i < b->size(); ++i) (*b)[i] = 0.5f + 0.01f * (k++ % 37);
  }
  return t;
}

std::vector<float> Inputs(int64_t n) {
  std::vector<float> x(n * 3 * 12 * 12);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>((i * 7919) % 1013) * 0.004f - 2.0f;
  }
  return x;
}

TEST(Predict, StreamsGiveTheOutputsOfOneCopy) {
  const int64_t n = 11;  // batches of 2: six, the last one short
  const std::vector<float> x = Inputs(n);
  SetComputeThreads(1);
  TrainedModel one = MakeTrained();
  absl::StatusOr<std::vector<float>> want = Predict(one, x.data(), n, 2, 1);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(want->size(), static_cast<size_t>(n * 5));
  for (int streams : {2, 3, 0}) {
    SCOPED_TRACE(streams);
    SetComputeThreads(3);
    TrainedModel t = MakeTrained();
    absl::StatusOr<std::vector<float>> got =
        Predict(t, x.data(), n, 2, streams);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, *want);
    EXPECT_EQ(ComputeThreads(), 3);  // restored after the streams
  }
  SetComputeThreads(1);
}

TEST(Predict, MoreStreamsThanBatchesRunWhatThereIs) {
  const std::vector<float> x = Inputs(3);
  SetComputeThreads(4);
  TrainedModel t = MakeTrained();
  absl::StatusOr<std::vector<float>> a = Predict(t, x.data(), 3, 8, 4);
  absl::StatusOr<std::vector<float>> b = Predict(t, x.data(), 3, 1, 4);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 15u);
  for (size_t i = 0; i < a->size(); ++i) EXPECT_NEAR((*a)[i], (*b)[i], 1e-5);
  SetComputeThreads(1);
}

}  // namespace
}  // namespace cohort
