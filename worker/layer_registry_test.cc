// Every LayerSpec kind has a CPU maker in float and double and an ONNX form,
// so a kind added to proto/job.proto without its files fails here rather
// than in a user's job.
#include "worker/layer_registry.h"

#include <string>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "proto/job.pb.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace {

// The fields of LayerSpec's `kind` oneof, by reflection.
std::vector<const google::protobuf::FieldDescriptor*> KindFields() {
  const google::protobuf::OneofDescriptor* kind =
      LayerSpec::descriptor()->FindOneofByName("kind");
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  if (kind == nullptr) return fields;
  for (int i = 0; i < kind->field_count(); ++i) {
    fields.push_back(kind->field(i));
  }
  return fields;
}

TEST(LayerRegistry, EveryKindHasCpuMakers) {
  ASSERT_FALSE(KindFields().empty());
  for (const google::protobuf::FieldDescriptor* f : KindFields()) {
    const CpuLayerMakers* makers = FindCpuLayer(f->number());
    ASSERT_NE(makers, nullptr) << f->name();
    EXPECT_NE(makers->make_float, nullptr) << f->name();
    EXPECT_NE(makers->make_double, nullptr) << f->name();
  }
}

TEST(LayerRegistry, NoKindMakesNoLayer) {
  EXPECT_EQ(MakeLayer<float>(LayerSpec()), nullptr);
  EXPECT_EQ(MakeLayer<double>(LayerSpec()), nullptr);
}

TEST(LayerRegistry, EveryKindHasAnOnnxForm) {
  ASSERT_FALSE(KindFields().empty());
  for (const google::protobuf::FieldDescriptor* f : KindFields()) {
    const onnx_internal::OnnxLayerForms* forms =
        onnx_internal::FindOnnxLayer(f->number());
    ASSERT_NE(forms, nullptr) << f->name();
    EXPECT_TRUE(forms->channel_major != nullptr || forms->sequence != nullptr)
        << f->name();
  }
}

// The transformer layers are exported in the sequence-major layout; a
// layer norm and a linear layer have both forms (per_position chooses).
TEST(LayerRegistry, SequenceLayersHaveTheirForm) {
  for (const int number :
       {LayerSpec::kEmbedding, LayerSpec::kPositionalEmbedding,
        LayerSpec::kAttention, LayerSpec::kTransformerBlock,
        LayerSpec::kTiedLmHead, LayerSpec::kLayernorm, LayerSpec::kLinear}) {
    const onnx_internal::OnnxLayerForms* forms =
        onnx_internal::FindOnnxLayer(number);
    ASSERT_NE(forms, nullptr) << number;
    EXPECT_NE(forms->sequence, nullptr) << number;
  }
  EXPECT_NE(onnx_internal::FindOnnxLayer(LayerSpec::kLayernorm)->channel_major,
            nullptr);
  EXPECT_NE(onnx_internal::FindOnnxLayer(LayerSpec::kLinear)->channel_major,
            nullptr);
}

TEST(LayerRegistry, SequenceLayersAsTheLayerKindsSay) {
  LayerSpec l;
  l.mutable_attention();
  EXPECT_TRUE(onnx_internal::IsSequenceLayer(l));
  l.mutable_layernorm();
  EXPECT_FALSE(onnx_internal::IsSequenceLayer(l));
  l.mutable_layernorm()->set_per_position(true);
  EXPECT_TRUE(onnx_internal::IsSequenceLayer(l));
  l.mutable_linear();
  EXPECT_FALSE(onnx_internal::IsSequenceLayer(l));
  l.mutable_linear()->set_per_position(true);
  EXPECT_TRUE(onnx_internal::IsSequenceLayer(l));
}

}  // namespace
}  // namespace cohort
