// The spec checker's shared pieces, private to common/spec*.cc: where a
// field sits in the text (Scope) and the range checks that report against
// it, plus the checks of the data block (spec_data.cc).
//
// Not a public API: only the spec library and the layer kinds' checks
// (common/layer_kinds/) include it. Thread safety: a Scope borrows the
// file name and parse tree of one ParseJobSpec call.
#ifndef COHORT_COMMON_SPEC_SCOPE_H_
#define COHORT_COMMON_SPEC_SCOPE_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/logging.h"
#include "google/protobuf/text_format.h"
#include "proto/job.pb.h"

namespace cohort {
namespace spec_internal {

using FieldDescriptor = google::protobuf::FieldDescriptor;
using Message = google::protobuf::Message;
using Tree = google::protobuf::TextFormat::ParseInfoTree;
using Loc = google::protobuf::TextFormat::ParseLocation;

// "FILE:L:C: " (1-based), or "FILE: " for no location.
inline std::string Prefix(const std::string& file, Loc loc) {
  if (loc.line < 0) return absl::StrCat(file, ": ");
  return absl::StrCat(file, ":", loc.line + 1, ":", loc.column + 1, ": ");
}

// One message of the spec as it sits in the text: its parse tree (null when
// the message was not written) and where to point when a field is absent.
class Scope {
 public:
  Scope(const std::string* file, const Tree* tree, std::string path, Loc at)
      : file_(file), tree_(tree), path_(std::move(path)), at_(at) {}

  Scope Nested(const Message& m, absl::string_view field, int index) const {
    return Nested(Field(m, field), index);
  }
  Scope Nested(const FieldDescriptor* fd, int index) const {
    Loc loc = Locate(fd, index);
    const Tree* child = tree_ != nullptr && loc.line >= 0
                            ? tree_->GetTreeForNested(fd, index)
                            : nullptr;
    return Scope(file_, child, absl::StrCat(Name(fd, index), "."),
                 loc.line >= 0 ? loc : at_);
  }

  // "FILE:L:C: path.field what", pointing at the field, or at the enclosing
  // message plus " (missing)" when the field was not written.
  absl::Status Error(const Message& m, absl::string_view field, int index,
                     absl::string_view what) const {
    return Error(Field(m, field), index, what);
  }
  absl::Status Error(const FieldDescriptor* fd, int index,
                     absl::string_view what) const {
    Loc loc = Locate(fd, index);
    bool missing = loc.line < 0;
    return absl::InvalidArgumentError(
        absl::StrCat(Prefix(*file_, missing ? at_ : loc), Name(fd, index), " ",
                     what, missing ? " (missing)" : ""));
  }

  // "FILE:L:C: " of `field` (of the enclosing message when the field was
  // not written), to start a message of one's own.
  std::string At(const Message& m, absl::string_view field, int index) const {
    const Loc loc = Locate(Field(m, field), index);
    return Prefix(*file_, loc.line < 0 ? at_ : loc);
  }

  // Whether `field` appears in the text.
  bool Written(const Message& m, absl::string_view field) const {
    return Locate(Field(m, field), -1).line >= 0;
  }

 private:
  static const FieldDescriptor* Field(const Message& m,
                                      absl::string_view field) {
    const FieldDescriptor* fd =
        m.GetDescriptor()->FindFieldByName(std::string(field));
    CHECK(fd != nullptr) << m.GetDescriptor()->name() << " has no " << field;
    return fd;
  }
  std::string Name(const FieldDescriptor* fd, int index) const {
    if (index < 0) return absl::StrCat(path_, fd->name());
    return absl::StrCat(path_, fd->name(), "[", index, "]");
  }
  Loc Locate(const FieldDescriptor* fd, int index) const {
    if (tree_ == nullptr) return Loc();
    if (fd->is_repeated() && index < 0) index = 0;
    Loc loc = tree_->GetLocation(fd, index);
    // `shape: [3, 32, 32]` records one location for the whole list.
    if (loc.line < 0 && index > 0) loc = tree_->GetLocation(fd, 0);
    return loc;
  }

  const std::string* file_;
  const Tree* tree_;
  std::string path_;
  Loc at_;
};

// Range checks, each "must be <rule>, got <value>".
template <typename V>
absl::Status Require(bool ok, const Scope& s, const Message& m,
                     absl::string_view field, absl::string_view rule, V got) {
  if (ok) return absl::OkStatus();
  return s.Error(m, field, -1, absl::StrCat("must be ", rule, ", got ", got));
}
template <typename V>
absl::Status Positive(const Scope& s, const Message& m, absl::string_view field,
                      V v) {
  return Require(v > 0, s, m, field, "> 0", v);
}
template <typename V>
absl::Status NonNegative(const Scope& s, const Message& m,
                         absl::string_view field, V v) {
  return Require(v >= 0, s, m, field, ">= 0", v);
}
inline absl::Status UnitInterval(const Scope& s, const Message& m,
                                 absl::string_view field, float v) {
  return Require(v >= 0 && v < 1, s, m, field, "in [0, 1)", v);
}
// A field that only means something for some kinds must stay zero otherwise.
inline absl::Status OnlyFor(bool applies, bool set, const Scope& s,
                            const Message& m, absl::string_view field,
                            absl::string_view kinds, absl::string_view kind) {
  if (applies || !set) return absl::OkStatus();
  return s.Error(m, field, -1,
                 absl::StrCat("applies only to ", kinds, ", got kind ", kind));
}

// The data block: its kind's own block and every field of it.
absl::Status CheckData(const DatasetSpec& d, const Scope& s);
// An embedding layer reads token ids: it needs TOKENS data whose
// vocabulary fits its table (`j`'s defaults filled).
absl::Status CheckTokenModel(const JobSpec& j, const Scope& s);
// A CRITEO job's embedding_bag tables (one per categorical feature) have
// at least the rows data.criteo.table_rows gives each feature.
absl::Status CheckTableModel(const JobSpec& j, const Scope& s);
// Every embedding_bag in `layers`, branches' paths included, in order.
void CollectEmbeddingBags(
    const google::protobuf::RepeatedPtrField<LayerSpec>& layers,
    std::vector<const EmbeddingBagSpec*>* bags);
// Sparse tables (embedding_bag.sparse) need PS mode, an optimizer that
// steps rows one at a time, and no gradient accumulation.
absl::Status CheckSparseTables(const JobSpec& j, const Scope& s);

// The compression block: all-reduce mode only; POWERSGD's rank,
// warm-up and rate in range; the other kinds take none of them.
absl::Status CheckCompression(const JobSpec& j, const Scope& s);

// The text-format parser's `message`, with the nearest field name added
// when it reports an unknown field (spec_suggest.cc): `Message type
// "cohort.ConvSpec" has no field named "kernel_size"; did you mean
// "kernel"?`. Other messages come back unchanged.
std::string WithFieldSuggestion(const std::string& message);

}  // namespace spec_internal
}  // namespace cohort

#endif  // COHORT_COMMON_SPEC_SCOPE_H_
