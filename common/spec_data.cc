// The checks of a spec's data block (DatasetSpec and its kinds' blocks).
#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/spec_scope.h"
#include "common/status_macros.h"
#include "common/zoo_specs.h"

namespace cohort {
namespace spec_internal {
namespace {

absl::Status CheckSynthetic(const SyntheticSpec& y, const Scope& s) {
  for (int i = 0; i < y.shape_size(); ++i) {
    if (y.shape(i) <= 0) {
      return s.Error(y, "shape", i,
                     absl::StrCat("must be > 0, got ", y.shape(i)));
    }
  }
  RETURN_IF_ERROR(Require(y.classes() == 0 || y.classes() >= 2, s, y, "classes",
                          ">= 2", y.classes()));
  RETURN_IF_ERROR(NonNegative(s, y, "train_samples", y.train_samples()));
  RETURN_IF_ERROR(NonNegative(s, y, "test_samples", y.test_samples()));
  return NonNegative(s, y, "noise", y.noise());
}

// The files of one split: as many label arrays as input arrays, or none
// when every input is a .npz archive (which holds its "y" too).
absl::Status CheckNumpySplit(
    const NumpySpec& n, const Scope& s, absl::string_view x_field,
    const google::protobuf::RepeatedPtrField<std::string>& xs,
    absl::string_view y_field, int y_count) {
  const int x_count = xs.size();
  RETURN_IF_ERROR(Require(x_count > 0, s, n, x_field,
                          "at least one .npy or .npz file", "none"));
  const bool archives = std::all_of(
      xs.begin(), xs.end(),
      [](const std::string& f) { return absl::EndsWith(f, ".npz"); });
  if (y_count == 0 && archives) return absl::OkStatus();
  return Require(
      y_count == x_count, s, n, y_field,
      absl::StrCat("one file per ", x_field, " file (", x_count, ")"), y_count);
}

absl::Status CheckNumpy(const NumpySpec& n, const Scope& s) {
  RETURN_IF_ERROR(Require(n.shape_size() > 0, s, n, "shape",
                          "the per-sample shape, e.g. [3, 32, 32]", "none"));
  for (int i = 0; i < n.shape_size(); ++i) {
    if (n.shape(i) <= 0) {
      return s.Error(n, "shape", i,
                     absl::StrCat("must be > 0, got ", n.shape(i)));
    }
  }
  for (int i = 0; i < n.target_shape_size(); ++i) {
    if (n.target_shape(i) <= 0) {
      return s.Error(n, "target_shape", i,
                     absl::StrCat("must be > 0, got ", n.target_shape(i)));
    }
  }
  if (n.target_shape_size() > 0) {
    RETURN_IF_ERROR(Require(n.classes() == 0, s, n, "classes",
                            "0 with float targets (target_shape)",
                            n.classes()));
  } else {
    RETURN_IF_ERROR(Require(n.classes() >= 2, s, n, "classes",
                            ">= 2 (or target_shape for float targets)",
                            n.classes()));
  }
  RETURN_IF_ERROR(CheckNumpySplit(n, s, "train_x", n.train_x(), "train_y",
                                  n.train_y_size()));
  return CheckNumpySplit(n, s, "test_x", n.test_x(), "test_y", n.test_y_size());
}

absl::Status CheckCsv(const CsvSpec& c, const Scope& s) {
  RETURN_IF_ERROR(Require(c.train_size() > 0, s, c, "train",
                          "at least one CSV file", "none"));
  RETURN_IF_ERROR(Require(c.test_size() > 0, s, c, "test",
                          "at least one CSV file", "none"));
  RETURN_IF_ERROR(Require(!c.target().empty(), s, c, "target",
                          "the name of the target column", "none"));
  if (c.regression()) {
    RETURN_IF_ERROR(Require(c.classes() == 0, s, c, "classes",
                            "0 with regression: true", c.classes()));
  } else {
    RETURN_IF_ERROR(Require(c.classes() >= 2, s, c, "classes",
                            ">= 2 (or regression: true for a float target)",
                            c.classes()));
  }
  return Require(c.features() >= 1, s, c, "features",
                 ">= 1 (the number of columns besides the target)",
                 c.features());
}

// `values` (mean or std) holds nothing (the default), one value for every
// channel, or one per channel; every std is positive.
absl::Status CheckChannelValues(const ImageFolderSpec& f, const Scope& s,
                                absl::string_view field,
                                const google::protobuf::RepeatedField<float>& v,
                                bool positive) {
  const int channels = f.grayscale() ? 1 : 3;
  if (v.size() > 1 && v.size() != channels) {
    return s.Error(f, field, -1,
                   absl::StrCat("must hold 1 or ", channels,
                                " values (one per channel), got ", v.size()));
  }
  for (int i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i]) || (positive && v[i] <= 0)) {
      return s.Error(f, field, i,
                     absl::StrCat("must be ", positive ? "> 0" : "finite",
                                  ", got ", v[i]));
    }
  }
  return absl::OkStatus();
}

// A [min, max] range whose zeros mean the defaults.
absl::Status CheckRange(const ImageFolderSpec& f, const Scope& s,
                        absl::string_view min_field, float min,
                        absl::string_view max_field, float max, float limit) {
  RETURN_IF_ERROR(Require(min > 0 && min <= limit, s, f, min_field,
                          absl::StrCat("in (0, ", limit, "]"), min));
  RETURN_IF_ERROR(Require(max > 0 && max <= limit, s, f, max_field,
                          absl::StrCat("in (0, ", limit, "]"), max));
  return Require(min <= max, s, f, max_field,
                 absl::StrCat(">= ", min_field, " (", min, ")"), max);
}

absl::Status CheckImageFolder(const ImageFolderSpec& f, const Scope& s) {
  RETURN_IF_ERROR(Require(f.classes() >= 2, s, f, "classes",
                          ">= 2 (the number of class folders)", f.classes()));
  RETURN_IF_ERROR(UnitInterval(s, f, "val_fraction", f.val_fraction()));
  RETURN_IF_ERROR(Require(f.image_size() >= 0 && f.image_size() <= 4096, s, f,
                          "image_size", "in [1, 4096]", f.image_size()));
  const int size = f.image_size() > 0 ? f.image_size() : 224;
  RETURN_IF_ERROR(
      Require(f.resize() == 0 || (f.resize() >= size && f.resize() <= 16384), s,
              f, "resize", absl::StrCat("in [image_size (", size, "), 16384]"),
              f.resize()));
  RETURN_IF_ERROR(CheckChannelValues(f, s, "mean", f.mean(), false));
  RETURN_IF_ERROR(CheckChannelValues(f, s, "std", f.std(), true));
  if (f.scale_min() != 0 || f.scale_max() != 0) {
    RETURN_IF_ERROR(CheckRange(
        f, s, "scale_min", f.scale_min() != 0 ? f.scale_min() : 0.08f,
        "scale_max", f.scale_max() != 0 ? f.scale_max() : 1.0f, 1.0f));
  }
  if (f.ratio_min() != 0 || f.ratio_max() != 0) {
    RETURN_IF_ERROR(CheckRange(
        f, s, "ratio_min", f.ratio_min() != 0 ? f.ratio_min() : 3.0f / 4,
        "ratio_max", f.ratio_max() != 0 ? f.ratio_max() : 4.0f / 3, 100.0f));
  }
  return absl::OkStatus();
}

absl::Status CheckTokens(const TokensSpec& t, const Scope& s) {
  RETURN_IF_ERROR(Require(!t.train().empty(), s, t, "train",
                          "the training file (text, .bin or .npy)", "none"));
  RETURN_IF_ERROR(Require(TokensSpec::Format_IsValid(t.format()), s, t,
                          "format", "BYTES, UINT16 or UINT32", t.format()));
  RETURN_IF_ERROR(Require(t.context() >= 1 && t.context() <= (1 << 20), s, t,
                          "context", "in [1, 1048576]", t.context()));
  RETURN_IF_ERROR(Require(t.stride() >= 0 && t.stride() <= (1 << 20), s, t,
                          "stride", "in [1, 1048576] (0: context)",
                          t.stride()));
  RETURN_IF_ERROR(Require(std::isfinite(t.val_fraction()) &&
                              t.val_fraction() >= 0 && t.val_fraction() < 1,
                          s, t, "val_fraction",
                          "in (0, 1) (0: 0.1 without a test file)",
                          t.val_fraction()));
  RETURN_IF_ERROR(OnlyFor(t.test().empty(), t.val_fraction() != 0, s, t,
                          "val_fraction", "no test file", "a test file"));
  if (t.format() == TokensSpec::BYTES) {
    return Require(t.vocab_size() >= 0 && t.vocab_size() <= 256, s, t,
                   "vocab_size", "in [2, 256] for BYTES (0: 256)",
                   t.vocab_size());
  }
  // Ids travel as float32 between the loader and the embedding.
  return Require(t.vocab_size() >= 2 && t.vocab_size() <= (1 << 24), s, t,
                 "vocab_size", "in [2, 16777216] for UINT16 and UINT32 ids",
                 t.vocab_size());
}

// Column counts: 0 means Criteo's own; a line must fit the loader's
// buffer (1 MiB), so anything near it is a typo.
constexpr int kMaxCriteoColumns = 1 << 16;

absl::Status CheckCriteo(const CriteoSpec& c, const Scope& s) {
  RETURN_IF_ERROR(Require(c.train_size() > 0, s, c, "train",
                          "at least one training file (text or .gz)", "none"));
  RETURN_IF_ERROR(Require(c.dense() >= 0 && c.dense() <= kMaxCriteoColumns, s,
                          c, "dense", "in [1, 65536] (0: 13)", c.dense()));
  RETURN_IF_ERROR(
      Require(c.categorical() >= 0 && c.categorical() <= kMaxCriteoColumns, s,
              c, "categorical", "in [1, 65536] (0: 26)", c.categorical()));
  const int categorical = c.categorical() > 0 ? c.categorical() : 26;
  RETURN_IF_ERROR(
      Require(c.table_rows_size() == 1 || c.table_rows_size() == categorical, s,
              c, "table_rows",
              absl::StrCat("1 value (every table) or ", categorical,
                           " (one per categorical feature)"),
              absl::StrCat(c.table_rows_size(), " values")));
  // Row ids travel as two floats, r >> 24 and r & 0xFFFFFF, each exact.
  for (int i = 0; i < c.table_rows_size(); ++i) {
    if (c.table_rows(i) <= 0 || c.table_rows(i) > (int64_t{1} << 48)) {
      return s.Error(
          c, "table_rows", i,
          absl::StrCat("must be in [1, 2^48], got ", c.table_rows(i)));
    }
  }
  RETURN_IF_ERROR(Require(std::isfinite(c.val_fraction()) &&
                              c.val_fraction() >= 0 && c.val_fraction() < 1,
                          s, c, "val_fraction",
                          "in (0, 1) (0: 0.1 without test files)",
                          c.val_fraction()));
  return OnlyFor(c.test().empty(), c.val_fraction() != 0, s, c, "val_fraction",
                 "no test files", "test files");
}

}  // namespace

absl::Status CheckData(const DatasetSpec& d, const Scope& s) {
  RETURN_IF_ERROR(NonNegative(s, d, "train_limit", d.train_limit()));
  RETURN_IF_ERROR(NonNegative(s, d, "loader_threads", d.loader_threads()));
  RETURN_IF_ERROR(NonNegative(s, d, "prefetch", d.prefetch()));
  const std::string kind = DatasetSpec::Kind_Name(d.kind());
  bool synthetic = d.kind() == DatasetSpec::SYNTHETIC;
  RETURN_IF_ERROR(OnlyFor(synthetic, d.has_synthetic(), s, d, "synthetic",
                          "SYNTHETIC", kind));
  bool numpy = d.kind() == DatasetSpec::NUMPY;
  RETURN_IF_ERROR(OnlyFor(numpy, d.has_numpy(), s, d, "numpy", "NUMPY", kind));
  bool csv = d.kind() == DatasetSpec::CSV;
  RETURN_IF_ERROR(OnlyFor(csv, d.has_csv(), s, d, "csv", "CSV", kind));
  bool tokens = d.kind() == DatasetSpec::TOKENS;
  RETURN_IF_ERROR(
      OnlyFor(tokens, d.has_tokens(), s, d, "tokens", "TOKENS", kind));
  bool criteo = d.kind() == DatasetSpec::CRITEO;
  RETURN_IF_ERROR(
      OnlyFor(criteo, d.has_criteo(), s, d, "criteo", "CRITEO", kind));
  if (tokens) {
    if (!d.has_tokens()) {
      return s.Error(d, "tokens", -1,
                     "kind TOKENS needs a tokens { train context } block");
    }
    RETURN_IF_ERROR(Require(d.no_normalize() == false, s, d, "no_normalize",
                            "unset (token ids are never normalised)", "true"));
    return CheckTokens(d.tokens(), s.Nested(d, "tokens", -1));
  }
  if (criteo) {
    if (!d.has_criteo()) {
      return s.Error(d, "criteo", -1,
                     "kind CRITEO needs a criteo { train table_rows } block");
    }
    RETURN_IF_ERROR(Require(d.no_normalize() == false, s, d, "no_normalize",
                            "unset (CRITEO features are log-scaled counts "
                            "and ids, never normalised)",
                            "true"));
    return CheckCriteo(d.criteo(), s.Nested(d, "criteo", -1));
  }
  bool images = d.kind() == DatasetSpec::IMAGE_FOLDER;
  RETURN_IF_ERROR(OnlyFor(images, d.has_image_folder(), s, d, "image_folder",
                          "IMAGE_FOLDER", kind));
  if (images) {
    if (!d.has_image_folder()) {
      return s.Error(d, "image_folder", -1,
                     "kind IMAGE_FOLDER needs an image_folder { classes } "
                     "block");
    }
    return CheckImageFolder(d.image_folder(), s.Nested(d, "image_folder", -1));
  }
  if (csv) {
    if (!d.has_csv()) {
      return s.Error(d, "csv", -1,
                     "kind CSV needs a csv { train test target classes "
                     "features } block");
    }
    return CheckCsv(d.csv(), s.Nested(d, "csv", -1));
  }
  if (numpy) {
    if (!d.has_numpy()) {
      return s.Error(d, "numpy", -1,
                     "kind NUMPY needs a numpy { shape classes train_x "
                     "train_y test_x test_y } block");
    }
    return CheckNumpy(d.numpy(), s.Nested(d, "numpy", -1));
  }
  return CheckSynthetic(d.synthetic(), s.Nested(d, "synthetic", -1));
}

absl::Status CheckTokenModel(const JobSpec& j, const Scope& s) {
  absl::StatusOr<std::vector<LayerSpec>> layers = LayerSpecs(j.model());
  if (!layers.ok() || layers->empty() || !(*layers)[0].has_embedding()) {
    return absl::OkStatus();
  }
  const EmbeddingSpec& e = (*layers)[0].embedding();
  const Scope model = s.Nested(j, "model", -1);
  const std::string at = j.model().zoo().empty()
                             ? model.At(j.model(), "layers", 0)
                             : model.At(j.model(), "zoo", -1);
  if (j.data().kind() != DatasetSpec::TOKENS) {
    return absl::InvalidArgumentError(absl::StrCat(
        at,
        "the embedding reads token ids, which only data kind TOKENS "
        "gives, not ",
        DatasetSpec::Kind_Name(j.data().kind())));
  }
  const int vocab = j.data().tokens().vocab_size();
  if (e.vocab_size() < vocab) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, "the embedding's vocab_size ", e.vocab_size(),
                     " is below the data's vocabulary (data.tokens.vocab_size ",
                     vocab, "): every id must have a row"));
  }
  return absl::OkStatus();
}

namespace {

// The embedding_bag layers of `layers`, those inside branch paths too.
}  // namespace

void CollectEmbeddingBags(
    const google::protobuf::RepeatedPtrField<LayerSpec>& layers,
    std::vector<const EmbeddingBagSpec*>* bags) {
  for (const LayerSpec& l : layers) {
    if (l.has_embedding_bag()) bags->push_back(&l.embedding_bag());
    for (const BranchSpec::Path& p : l.branch().paths()) {
      CollectEmbeddingBags(p.layers(), bags);
    }
  }
}

absl::Status CheckTableModel(const JobSpec& j, const Scope& s) {
  if (j.data().kind() != DatasetSpec::CRITEO) return absl::OkStatus();
  absl::StatusOr<std::vector<LayerSpec>> layers = LayerSpecs(j.model());
  if (!layers.ok()) return absl::OkStatus();
  google::protobuf::RepeatedPtrField<LayerSpec> all(layers->begin(),
                                                    layers->end());
  std::vector<const EmbeddingBagSpec*> bags;
  CollectEmbeddingBags(all, &bags);
  const CriteoSpec& c = j.data().criteo();  // table_rows: one per feature
  const Scope model = s.Nested(j, "model", -1);
  const std::string at = j.model().zoo().empty()
                             ? model.At(j.model(), "layers", -1)
                             : model.At(j.model(), "zoo", -1);
  // A bag of one table per categorical feature reads them in order; one of
  // another count reads a selection this check cannot see.
  for (const EmbeddingBagSpec* bag : bags) {
    if (bag->rows_size() != c.table_rows_size()) continue;
    for (int t = 0; t < bag->rows_size(); ++t) {
      if (bag->rows(t) >= c.table_rows(t)) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          at, "embedding_bag table ", t, " has ", bag->rows(t),
          " rows, fewer than data.criteo.table_rows gives categorical "
          "feature ",
          t, " (", c.table_rows(t),
          "): an id could fall past it; give the table as many rows"));
    }
  }
  return absl::OkStatus();
}

}  // namespace spec_internal
}  // namespace cohort
