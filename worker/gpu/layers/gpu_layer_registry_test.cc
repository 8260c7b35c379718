// Every LayerSpec kind has a GPU maker, so a kind added to proto/job.proto
// without its GPU file fails here rather than in a user's job. Needs no
// device: it only looks the makers up.
#include "worker/gpu/layers/gpu_layer_registry.h"

#include <utility>

#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "proto/job.pb.h"
#include "worker/gpu/layers/gpu_layer_factory.h"

namespace cohort {
namespace {

TEST(GpuLayerRegistry, EveryKindHasAMaker) {
  const google::protobuf::OneofDescriptor* kind =
      LayerSpec::descriptor()->FindOneofByName("kind");
  ASSERT_NE(kind, nullptr);
  ASSERT_GT(kind->field_count(), 0);
  for (int i = 0; i < kind->field_count(); ++i) {
    EXPECT_NE(FindGpuLayer(kind->field(i)->number()), nullptr)
        << kind->field(i)->name();
  }
}

TEST(GpuLayerRegistry, NoKindIsAnError) {
  absl::StatusOr<std::unique_ptr<GpuLayer>> layer = MakeGpuLayer(LayerSpec());
  ASSERT_FALSE(layer.ok());
  EXPECT_EQ(layer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(layer.status().message(), "a model layer names no layer kind");
}

// Kinds with no GPU layer are refused while the model is built, naming the
// layer and where it runs.
TEST(GpuLayerRegistry, CpuOnlyKindsAreRefusedNamingTheLayer) {
  LayerSpec slice, bag, interaction;
  slice.mutable_slice()->set_end(4);
  bag.mutable_embedding_bag()->add_rows(10);
  bag.set_name("emb");
  interaction.mutable_interaction()->set_dim(4);
  const std::pair<const LayerSpec*, const char*> cases[] = {
      {&slice,
       "layer slice: the GPU engine has no slice layer; train this "
       "model on CPU devices (--devices=cpu:N)"},
      {&bag,
       "layer embedding_bag \"emb\": the GPU engine has no "
       "embedding_bag layer; train this model on CPU devices "
       "(--devices=cpu:N)"},
      {&interaction,
       "layer interaction: the GPU engine has no interaction "
       "layer; train this model on CPU devices "
       "(--devices=cpu:N)"},
  };
  for (const auto& [spec, want] : cases) {
    absl::StatusOr<std::unique_ptr<GpuLayer>> layer = MakeGpuLayer(*spec);
    ASSERT_FALSE(layer.ok()) << want;
    EXPECT_EQ(layer.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(layer.status().message(), want);
  }
}

}  // namespace
}  // namespace cohort
