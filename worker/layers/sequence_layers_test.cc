// The vision transformer's sequence layers: to_sequence keeps each pixel's
// features at position h * W + w, sequence_pool averages the positions;
// gradients against finite differences and the refusals of Configure.
// Their agreement with PyTorch is tests/layers_torch_test.
#include <string>

#include "gtest/gtest.h"
#include "worker/layers/grad_check.h"
#include "worker/layers/sequence_pool.h"
#include "worker/layers/to_sequence.h"

namespace cohort {
namespace {

// An element's value encodes its (c, n, h, w).
double Code(int c, int n, int h, int w) {
  return 1000 * c + 100 * n + 10 * h + w;
}

TEST(ToSequence, PositionsArePixelsInRowMajorOrder) {
  // Batch-inner {C=2, N=3, H=2, W=3}.
  ToSequence<double> layer;
  const absl::StatusOr<Shape> out_shape = layer.Configure({2, 2, 3});
  ASSERT_TRUE(out_shape.ok()) << out_shape.status();
  EXPECT_EQ(*out_shape, (Shape{2, 6}));
  TensorD in({2, 3, 2, 3});
  for (int c = 0; c < 2; ++c)
    for (int n = 0; n < 3; ++n)
      for (int h = 0; h < 2; ++h)
        for (int w = 0; w < 3; ++w)
          in[((c * 3 + n) * 2 + h) * 3 + w] = Code(c, n, h, w);
  TensorD out;
  layer.Forward(in, &out, Mode::kTrain);
  ASSERT_EQ(out.shape(), (Shape{2, 3, 6}));
  // {D, N, L}: feature c of sample n at position h * W + w.
  for (int c = 0; c < 2; ++c)
    for (int n = 0; n < 3; ++n)
      for (int h = 0; h < 2; ++h)
        for (int w = 0; w < 3; ++w)
          EXPECT_EQ(out[(c * 3 + n) * 6 + h * 3 + w], Code(c, n, h, w));
  TensorD back;
  layer.Backward(out, &back);
  ASSERT_EQ(back.shape(), in.shape());
  for (int64_t i = 0; i < in.size(); ++i) EXPECT_EQ(back[i], in[i]);
}

TEST(ToSequence, RefusesWhatIsNotAnImage) {
  for (const Shape& in : {Shape{4, 9}, Shape{12}, Shape{3, 0, 4}}) {
    ToSequence<float> layer;
    const absl::StatusOr<Shape> out = layer.Configure(in);
    ASSERT_FALSE(out.ok()) << ShapeString(in);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(out.status().message().find(ShapeString(in)), std::string::npos)
        << out.status();
  }
}

TEST(ToSequence, GradientsMatchFiniteDifferences) {
  ToSequence<double> layer;
  const absl::Status s = CheckLayerGradients(layer, {3, 2, 4}, {3, 2, 2, 4});
  EXPECT_TRUE(s.ok()) << s;
}

TEST(SequencePool, MeanOfEachFeatureOverThePositions) {
  // {D=2, N=2, L=3}.
  SequencePool<double> layer;
  const absl::StatusOr<Shape> out_shape = layer.Configure({2, 3});
  ASSERT_TRUE(out_shape.ok()) << out_shape.status();
  EXPECT_EQ(*out_shape, (Shape{2}));
  TensorD in({2, 2, 3});
  for (int64_t i = 0; i < in.size(); ++i) in[i] = static_cast<double>(i * i);
  TensorD out;
  layer.Forward(in, &out, Mode::kEval);
  ASSERT_EQ(out.shape(), (Shape{2, 2}));
  // Dense {N, D}: out[n, d] = mean over t of in[d, n, t].
  EXPECT_DOUBLE_EQ(out[0 * 2 + 0], (0 + 1 + 4) / 3.0);
  EXPECT_DOUBLE_EQ(out[1 * 2 + 0], (9 + 16 + 25) / 3.0);
  EXPECT_DOUBLE_EQ(out[0 * 2 + 1], (36 + 49 + 64) / 3.0);
  EXPECT_DOUBLE_EQ(out[1 * 2 + 1], (81 + 100 + 121) / 3.0);
  TensorD grad_out({2, 2}), grad_in;
  for (int64_t i = 0; i < grad_out.size(); ++i) grad_out[i] = 3.0 * (i + 1);
  layer.Backward(grad_out, &grad_in);
  ASSERT_EQ(grad_in.shape(), in.shape());
  // Each position gets its row's gradient over L: d1 of sample 0 is
  // grad_out[0 * 2 + 1] = 6.
  for (int t = 0; t < 3; ++t) EXPECT_DOUBLE_EQ(grad_in[(1 * 2 + 0) * 3 + t], 2);
}

TEST(SequencePool, RefusesWhatIsNotASequence) {
  for (const Shape& in : {Shape{4, 3, 3}, Shape{8}, Shape{4, 0}}) {
    SequencePool<float> layer;
    const absl::StatusOr<Shape> out = layer.Configure(in);
    ASSERT_FALSE(out.ok()) << ShapeString(in);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(out.status().message().find(ShapeString(in)), std::string::npos)
        << out.status();
  }
}

TEST(SequencePool, GradientsMatchFiniteDifferences) {
  SequencePool<double> layer;
  absl::Status s = CheckLayerGradients(layer, {5, 7}, {5, 3, 7});
  EXPECT_TRUE(s.ok()) << s;
  SequencePool<double> one_position;
  s = CheckLayerGradients(one_position, {4, 1}, {4, 2, 1});
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace cohort
