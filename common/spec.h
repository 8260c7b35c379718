// Loading and validating job specs (proto/job.proto, text format).
//
// A spec is parsed, every field is checked against its documented range, and
// the defaults the proto comments promise are filled in, so the rest of the
// system reads a JobSpec without re-checking or special-casing zeros. Errors
// are one sentence prefixed with "FILE:LINE:COL: " (1-based) pointing at the
// offending field, or at the enclosing message (or just "FILE: ") and marked
// "(missing)" when the field was not written.
//
// proto3 cannot tell an unset field from an explicit zero, so a zero in a
// field with a documented default means "use the default" (e.g. beta1: 0 is
// read as 0.9). This keeps normalisation idempotent: parsing the text form of
// a normalised spec gives the same spec back.
//
// Sizes are checked too, in checked arithmetic (common/model_sizes.h): a
// zoo name, a layer whose input does not fit it, or a model or data set
// whose bytes pass 2^63 is an error pointing at the layer (or the zoo name,
// or the synthetic shape). Whether the job fits a machine's memory is for
// the processes that hold it to check (common/memory_estimate.h). Data
// directories are not checked here: the loader owns those (and `--data-dir`
// may supply them).
//
// Thread safety: all functions are pure and may be called concurrently.
#ifndef COHORT_COMMON_SPEC_H_
#define COHORT_COMMON_SPEC_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/job.pb.h"

namespace cohort {

// A fingerprint of everything that decides a run's mathematics: model,
// data set, batch size, optimizer, schedule kind, loss, seed, drop_last
// and training mode. Not the stopping point (epochs, max_steps), the
// cluster, evaluation, checkpoint or log settings, or paths: a checkpoint may
// be resumed with more epochs or from another directory.
uint64_t TrainingHash(const JobSpec& spec);

// Parses `text` (the contents of `filename`, used only in messages),
// validates it and fills defaults. InvalidArgument on any error.
absl::StatusOr<JobSpec> ParseJobSpec(absl::string_view text,
                                     const std::string& filename);

// The most a job spec file may hold.
inline constexpr int64_t kMaxJobSpecBytes = int64_t{16} << 20;

// Reads the file at `path`, then ParseJobSpec. When the file cannot be
// read: the errno's status code (NotFound, PermissionDenied...) and a
// message naming the path. InvalidArgument, without reading it, for a path
// that is not a regular file or a pipe (a directory, /dev/zero), a FIFO
// that nothing writes to, or one larger than kMaxJobSpecBytes.
absl::StatusOr<JobSpec> LoadJobSpec(const std::string& path);

// One line for logs: name, model, data, batch, stopping rule, optimizer and
// schedule.
std::string DescribeJobSpec(const JobSpec& spec);

// Whether `data`'s targets are float tensors (NUMPY with target_shape, CSV
// with regression, CRITEO's 0/1 labels) rather than class labels.
bool HasFloatTargets(const DatasetSpec& data);

// Fills the cluster defaults documented in proto/job.proto (zero, or unset
// for max_restarts, means default). Idempotent. ParseJobSpec calls it; the
// coordinator calls it too, on a spec it is handed, so that both read the
// same cluster.
void FillClusterDefaults(ClusterSpec* cluster);

// Fills the image folder defaults documented in proto/job.proto (mean and
// std expanded to one value per channel). Idempotent; FillJobDefaults calls
// it for kind IMAGE_FOLDER, the loader on specs built in code.
void FillImageFolderDefaults(ImageFolderSpec* spec);

// Fills the token data defaults (vocabulary 256 for BYTES, stride =
// context, val_fraction 0.1 without a test file). Idempotent; FillJobDefaults
// calls it for kind TOKENS, LoadTokens on specs built in code.
void FillTokensDefaults(TokensSpec* spec);

// Fills the Criteo data defaults (13 dense and 26 categorical columns,
// val_fraction 0.1 without test files, a single table_rows value repeated
// for every categorical feature). Idempotent; FillJobDefaults calls it for
// kind CRITEO, LoadCriteo on specs built in code.
void FillCriteoDefaults(CriteoSpec* spec);

// Fills every default documented in proto/job.proto (the cluster's too).
// Idempotent. ParseJobSpec calls it after validation.
void FillJobDefaults(JobSpec* spec);

}  // namespace cohort

#endif  // COHORT_COMMON_SPEC_H_
