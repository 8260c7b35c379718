// The importer's Softmax (along the channels), PRelu (one slope or one per
// channel) and Resize / Upsample (nn.Upsample's integer nearest and
// bilinear forms), as torch.onnx.export writes nn.Softmax(dim=1),
// nn.PReLU and nn.Upsample(scale_factor=k).
#include <cmath>
#include <functional>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/onnx/onnx_importer.h"
#include "common/status_macros.h"

namespace cohort {
namespace onnx_import_internal {
namespace {

absl::Status Refuse(const std::string& label, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(label, ": ", why));
}

int64_t Product(const Dims& d) {
  return std::accumulate(d.begin(), d.end(), int64_t{1},
                         std::multiplies<int64_t>());
}

// `dims` with a 1 inserted at each of `axes` (of the result's rank), as
// Unsqueeze does.
absl::StatusOr<Dims> Unsqueezed(const Dims& dims, Dims axes) {
  const int64_t rank = static_cast<int64_t>(dims.size() + axes.size());
  std::vector<char> one(rank, 0);
  for (int64_t& a : axes) {
    if (a < 0) a += rank;
    if (a < 0 || a >= rank || one[a]) {
      return absl::InvalidArgumentError("its axes do not fit");
    }
    one[a] = 1;
  }
  Dims out;
  size_t next = 0;
  for (int64_t i = 0; i < rank; ++i) {
    out.push_back(one[i] ? 1 : dims[next++]);
  }
  return out;
}

// Where coordinate_transformation_mode and nearest_mode give PyTorch's
// nearest for an integer factor k, input floor(i / k): asymmetric with
// floor (what torch writes), or half-pixel centres rounded to nearest,
// whose fraction stays within (-1/2, 1/2) of floor(i / k).
bool NearestIsFloor(const std::string& transform, const std::string& round) {
  if (transform == "asymmetric") return round == "floor";
  return (transform == "half_pixel" || transform == "pytorch_half_pixel") &&
         (round == "round_prefer_floor" || round == "round_prefer_ceil");
}

}  // namespace

absl::StatusOr<std::string> Importer::MapSoftmax(int node, const Region& r) {
  const onnx::NodeProto& n = g_.node(node);
  const Dims& in = In(node);
  const int64_t rank = static_cast<int64_t>(in.size()) + 1;
  // Opset 13 made the axis default -1 and the softmax one axis wide.
  int64_t axis = IntAttr(n, "axis", opset_ >= 13 ? -1 : 1);
  if (axis < 0) axis += rank;
  if (axis != 1) {
    return Refuse(g_.Label(node),
                  absl::StrCat("a softmax along axis ", IntAttr(n, "axis", -1),
                               " of samples of ", DimsString(in),
                               "; cohort's softmax is nn.Softmax(dim=1), "
                               "along the channels"));
  }
  if (opset_ < 13 && in.size() > 1) {
    return Refuse(
        g_.Label(node),
        absl::StrCat("opset ", opset_,
                     "'s Softmax normalises all of a sample's ", DimsString(in),
                     " at once; cohort's softmax is opset 13's, "
                     "along the channels at each position"));
  }
  NewLayer(r)->mutable_softmax();
  return Done(node, in);
}

absl::StatusOr<ConstTensor> Importer::PreluSlope(int node) {
  const onnx::NodeProto& n = g_.node(node);
  const int unsqueeze = n.input_size() > 1 ? g_.Producer(n.input(1)) : -1;
  if (unsqueeze < 0 || g_.node(unsqueeze).op_type() != "Unsqueeze") {
    return Weight(node, 1, {});
  }
  // torch unsqueezes the weight to line it up with axis 1; reading its
  // input keeps the initializer (and so the parameter's name).
  const onnx::NodeProto& u = g_.node(unsqueeze);
  ASSIGN_OR_RETURN(ConstTensor t, Weight(unsqueeze, 0, {}));
  Dims axes = IntsAttr(u, "axes", {});  // before opset 13
  if (u.input_size() > 1 && !u.input(1).empty()) {
    ASSIGN_OR_RETURN(const ConstTensor a, Weight(unsqueeze, 1, {}));
    axes = a.ints;
  }
  absl::StatusOr<Dims> dims = Unsqueezed(t.dims, axes);
  if (!dims.ok()) return Refuse(g_.Label(unsqueeze), "its axes do not fit");
  t.dims = *dims;
  return t;
}

absl::StatusOr<std::string> Importer::MapPrelu(int node, const Region& r) {
  const std::string label = g_.Label(node);
  const Dims& in = In(node);
  ASSIGN_OR_RETURN(ConstTensor slope, PreluSlope(node));
  const Dims s = slope.dims;
  // The slope broadcasts from the right against [N, in...]: one per channel
  // is [C] followed by a 1 per spatial dim (leading 1s allowed).
  const int64_t at =
      static_cast<int64_t>(s.size()) - static_cast<int64_t>(in.size());
  const bool fits_rank = s.size() <= in.size() + 1;
  const bool shared = fits_rank && Product(s) == 1;
  const bool per_channel =
      fits_rank && at >= 0 && s[at] == in[0] && Product(s) == in[0];
  if (slope.integer || (!shared && !per_channel)) {
    return Refuse(label,
                  absl::StrCat("slope ", DimsString(s), " against samples of ",
                               DimsString(in),
                               "; cohort's prelu takes one slope or one per "
                               "channel (nn.PReLU(num_parameters=C))"));
  }
  const int64_t count = shared ? 1 : in[0];
  slope.dims = {count};
  NewLayer(r)->mutable_prelu()->set_num_parameters(count);
  AddWeight(r, "weight", std::move(slope));
  return Done(node, in);
}

absl::StatusOr<std::vector<double>> Importer::ResizeFactors(int node,
                                                            const Dims& in) {
  const onnx::NodeProto& n = g_.node(node);
  // Upsample (opset 9) and Resize (opset 10) take the scales as input 1;
  // Resize from opset 11 on as input 2 (after the region of interest), or
  // output sizes as input 3 with the scales left empty; Upsample of opset
  // 7 as an attribute.
  const bool resize11 = n.op_type() == "Resize" && n.input_size() > 2;
  bool sizes = false;
  if (resize11 && n.input_size() > 3 && !n.input(3).empty()) {
    absl::StatusOr<ConstTensor> scales = g_.Fold(n.input(2));
    sizes = n.input(2).empty() || (scales.ok() && scales->size() == 0);
  }
  if (sizes) {
    ASSIGN_OR_RETURN(const ConstTensor t, Weight(node, 3, {4}));
    if (!t.integer) return Refuse(g_.Label(node), "its sizes are not integers");
    // The batch size is torch's x.size(0): only the other dims count.
    return std::vector<double>{1, static_cast<double>(t.ints[1]) / in[0],
                               static_cast<double>(t.ints[2]) / in[1],
                               static_cast<double>(t.ints[3]) / in[2]};
  }
  const int index = resize11 ? 2 : 1;
  if (n.input_size() > index && !n.input(index).empty()) {
    ASSIGN_OR_RETURN(const ConstTensor t, Weight(node, index, {4}));
    return std::vector<double>{t.At(0), t.At(1), t.At(2), t.At(3)};
  }
  const onnx::AttributeProto* a = FindAttr(n, "scales");
  if (a == nullptr || a->floats_size() != 4) {
    return Refuse(g_.Label(node), "it names no scales cohort can read");
  }
  return std::vector<double>(a->floats().begin(), a->floats().end());
}

absl::StatusOr<int64_t> Importer::ResizeScale(int node, const Dims& in) {
  ASSIGN_OR_RETURN(const std::vector<double> f, ResizeFactors(node, in));
  const double k = std::round(f[2]);
  if (f[0] != 1 || f[1] != 1 || f[2] != f[3] || k < 1 ||
      std::abs(f[2] - k) > 1e-6 * k) {
    return Refuse(
        g_.Label(node),
        absl::StrCat("scales [", f[0], ", ", f[1], ", ", f[2], ", ", f[3],
                     "]; cohort's upsample takes one integer factor "
                     "for height and width (nn.Upsample("
                     "scale_factor=k))"));
  }
  return static_cast<int64_t>(k);
}

absl::Status Importer::CheckResizeMode(int node) {
  const onnx::NodeProto& n = g_.node(node);
  const std::string mode = StringAttr(n, "mode", "nearest");
  const std::string transform =
      StringAttr(n, "coordinate_transformation_mode", "half_pixel");
  // Before opset 11 there are no coordinate transforms: the nearest input
  // is floor(i / k), and linear is asymmetric, not PyTorch's.
  const bool old = n.op_type() == "Upsample" || n.input_size() <= 2;
  bool fits = false;
  if (mode == "nearest") {
    fits = old || NearestIsFloor(transform, StringAttr(n, "nearest_mode",
                                                       "round_prefer_floor"));
  } else if ((mode == "linear" || mode == "bilinear") && !old) {
    fits = transform == "half_pixel" || transform == "pytorch_half_pixel";
  }
  if (fits && IntAttr(n, "antialias", 0) == 0 &&
      FindAttr(n, "axes") == nullptr) {
    return absl::OkStatus();
  }
  std::string what =
      old ? absl::StrCat("mode ", mode, " (", n.op_type(), " of opset ", opset_,
                         ": asymmetric coordinates)")
          : absl::StrCat("mode ", mode, " with ", transform, " coordinates");
  if (transform == "align_corners") absl::StrAppend(&what, ", align_corners");
  return Refuse(g_.Label(node),
                absl::StrCat(what,
                             "; cohort's upsample is nn.Upsample's nearest or "
                             "bilinear with align_corners=False"));
}

absl::StatusOr<std::string> Importer::MapResize(int node, const Region& r) {
  const std::string label = g_.Label(node);
  const Dims& in = In(node);
  if (in.size() != 3) {
    return Refuse(label, absl::StrCat("resizes samples of ", DimsString(in),
                                      "; cohort's upsample takes [C, H, W]"));
  }
  RETURN_IF_ERROR(CheckResizeMode(node));
  ASSIGN_OR_RETURN(const int64_t k, ResizeScale(node, in));
  if (k == 1) return Done(node, in);
  UpsampleSpec* u = NewLayer(r)->mutable_upsample();
  u->set_scale(k);
  const std::string mode = StringAttr(g_.node(node), "mode", "nearest");
  if (mode != "nearest") u->set_mode(UpsampleSpec::BILINEAR);
  return Done(node, {in[0], in[1] * k, in[2] * k});
}

}  // namespace onnx_import_internal
}  // namespace cohort
