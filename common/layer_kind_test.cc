// Every kind of LayerSpec's `kind` oneof has its descriptor in
// common/layer_kinds/, under its field's name, and the sequence kinds are
// the ones the exports lay out sequence-major.
#include "common/layer_kind.h"

#include <set>
#include <string>

#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "proto/job.pb.h"

namespace cohort {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::OneofDescriptor;

const OneofDescriptor* KindOneof() {
  return LayerSpec::descriptor()->FindOneofByName("kind");
}

// A layer of the kind that field `fd` of the oneof selects.
LayerSpec LayerOf(const FieldDescriptor* fd) {
  LayerSpec l;
  l.GetReflection()->MutableMessage(&l, fd);
  return l;
}

bool IsSequence(const LayerSpec& l) {
  const LayerKind* kind = FindLayerKind(l);
  return kind != nullptr && kind->sequence != nullptr && kind->sequence(l);
}

TEST(LayerKind, EveryKindIsRegisteredUnderItsFieldName) {
  const OneofDescriptor* oneof = KindOneof();
  ASSERT_NE(oneof, nullptr);
  for (int i = 0; i < oneof->field_count(); ++i) {
    const FieldDescriptor* fd = oneof->field(i);
    SCOPED_TRACE(fd->name());
    const LayerKind* kind = FindLayerKind(fd->number());
    ASSERT_NE(kind, nullptr) << "no file in common/layer_kinds/ registers it";
    EXPECT_EQ(std::string(kind->name), fd->name());
    EXPECT_NE(kind->infer, nullptr);
    EXPECT_EQ(FindLayerKind(LayerOf(fd)), kind);
  }
  EXPECT_EQ(RegisteredLayerKinds().size(),
            static_cast<size_t>(oneof->field_count()));
}

TEST(LayerKind, NoKindFindsNothing) {
  EXPECT_EQ(LayerKindNumber(LayerSpec()), 0);
  EXPECT_EQ(FindLayerKind(LayerSpec()), nullptr);
}

// The worker's ONNX export asks `sequence` which layers work on {D, L}
// sequences; it must name exactly the transformer's kinds.
TEST(LayerKind, SequenceKindsAreTheTransformersKinds) {
  const std::set<std::string> sequence = {"embedding", "positional_embedding",
                                          "attention", "transformer_block",
                                          "tied_lm_head"};
  const OneofDescriptor* oneof = KindOneof();
  ASSERT_NE(oneof, nullptr);
  for (int i = 0; i < oneof->field_count(); ++i) {
    const FieldDescriptor* fd = oneof->field(i);
    EXPECT_EQ(IsSequence(LayerOf(fd)), sequence.count(fd->name()) > 0)
        << fd->name();
  }
  LayerSpec per_position;
  per_position.mutable_layernorm()->set_per_position(true);
  EXPECT_TRUE(IsSequence(per_position));
  per_position.mutable_linear()->set_per_position(true);
  EXPECT_TRUE(IsSequence(per_position));
}

}  // namespace
}  // namespace cohort
