// branch: paths of layers over the same input, concatenated, summed or
// multiplied (Inception blocks, MobileNet's inverted residuals, shortcuts,
// squeeze-and-excitation), as
// worker/layers/branch.h. Its layers are checked, filled and inferred
// through their own kinds.
#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/broadcast.h"
#include "common/layer_kind.h"
#include "common/layer_spec_check.h"
#include "common/shape_inference.h"
#include "common/spec_scope.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

using shape_inference::Checked;
using shape_inference::Elements;
using shape_inference::InferLayer;
using shape_inference::KindName;
using shape_inference::Unfit;
using spec_internal::CheckLayerSpec;
using spec_internal::FillLayerSpecDefaults;
using spec_internal::Scope;

absl::Status CheckBranch(const LayerSpec& l, const Scope& s) {
  const BranchSpec& b = l.branch();
  if (b.paths_size() == 0) {
    return s.Error(b, "paths", -1, "must list at least one path, got none");
  }
  for (int p = 0; p < b.paths_size(); ++p) {
    const Scope path = s.Nested(b, "paths", p);
    for (int i = 0; i < b.paths(p).layers_size(); ++i) {
      RETURN_IF_ERROR(
          CheckLayerSpec(b.paths(p).layers(i), path, b.paths(p), i));
    }
  }
  return absl::OkStatus();
}

void FillBranch(LayerSpec* l) {
  for (BranchSpec::Path& p : *l->mutable_branch()->mutable_paths()) {
    for (LayerSpec& sub : *p.mutable_layers()) FillLayerSpecDefaults(&sub);
  }
}

// Runs path `p` of `b` from the block's input `in` to *shape, appending its
// parameters and activations to *out.
absl::Status AddPath(const BranchSpec& b, int p, const Shape& in, Shape* shape,
                     InferredLayer* out) {
  *shape = in;
  const auto& layers = b.paths(p).layers();
  for (int i = 0; i < layers.size(); ++i) {
    absl::StatusOr<LayerSizes> s = InferLayer(layers[i], *shape);
    if (!s.ok()) {
      return Unfit(
          absl::StrCat("path ", p, " layer ", i, " (", KindName(layers[i]),
                       ") cannot take input of shape ", ShapeString(*shape),
                       ": ", s.status().message()));
    }
    out->params.insert(out->params.end(), s->param_tensors.begin(),
                       s->param_tensors.end());
    out->no_decay.insert(out->no_decay.end(), s->param_no_decay.begin(),
                         s->param_no_decay.end());
    *out->activations += s->activations;
    *shape = s->output;
  }
  return absl::OkStatus();
}

// Each path is a chain from the block's input; the outputs are summed
// (equal shapes), multiplied (equal shapes, or a [C, 1, 1] gate scaling
// [C, H, W]) or concatenated along the first dimension (the rest equal).
absl::StatusOr<InferredLayer> InferBranch(const LayerSpec& l, const Shape& in) {
  const BranchSpec& b = l.branch();
  if (b.paths_size() == 0) return Unfit("it needs at least one path");
  InferredLayer out;
  out.activations = 0;
  Shape first;  // MUL: the largest shape so far, given by path `ref`
  int ref = 0;
  for (int p = 0; p < b.paths_size(); ++p) {
    Shape shape;
    RETURN_IF_ERROR(AddPath(b, p, in, &shape, &out));
    if (p == 0) {
      first = shape;
      out.output = Checked(shape);
      continue;
    }
    bool fits, grown = false;
    const char* rule;
    switch (b.combine()) {
      case BranchSpec::SUM:
        fits = shape == first;
        rule = "; summed paths must give the same shape";
        break;
      case BranchSpec::MUL:
        fits = FitsProduct(shape, &first, &grown);
        if (grown) ref = p;
        rule =
            "; multiplied paths must give the same shape, or [C, 1, 1] to "
            "scale [C, H, W]";
        break;
      default:
        fits = shape.size() == first.size() &&
               std::equal(shape.begin() + 1, shape.end(), first.begin() + 1);
        rule = "; concatenated paths must agree in all but the channels";
        if (fits) out.output[0] += shape[0];
    }
    if (!fits) {
      return Unfit(absl::StrCat("path ", p, " gives ", ShapeString(shape),
                                " but path ", ref, " gives ",
                                ShapeString(first), rule));
    }
  }
  if (b.combine() == BranchSpec::MUL) out.output = Checked(first);
  *out.activations += Elements(out.output);
  return out;
}

const LayerKind kBranch = {"branch", CheckBranch, FillBranch, InferBranch};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kBranch, kBranch);

}  // namespace
}  // namespace cohort
