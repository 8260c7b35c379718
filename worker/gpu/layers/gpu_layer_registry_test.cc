// Every LayerSpec kind has a GPU maker, so a kind added to proto/job.proto
// without its GPU file fails here rather than in a user's job. Needs no
// device: it only looks the makers up.
#include "worker/gpu/layers/gpu_layer_registry.h"

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

}  // namespace
}  // namespace cohort
