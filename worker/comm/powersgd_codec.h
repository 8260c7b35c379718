// PowerSgdCodec: low-rank gradient compression with error feedback
// (CompressionSpec POWERSGD), the algorithm of Vogels et al. as PyTorch
// 1.13's powerSGD_hook runs it with warm start and error feedback on.
//
// Per bucket and step, after `warmup_steps` steps of plain all-reduce:
//   1. add this rank's error (what earlier steps did not transmit);
//   2. view each weight as M (rows x elements / rows); those with
//      (rows + cols) x r x min_compression_rate < rows x cols are
//      compressed, the rest (biases, norms, small weights) travel whole;
//   3. P = M Q (Q: the last step's, orthogonalized; at first N(0, 1) from
//      the job's seed, the same on every rank), all-reduced together with
//      the whole tensors;
//   4. P orthogonalized (Gram-Schmidt), Q = M^T P, all-reduced;
//   5. M ~ P Q^T; error = input - this rank's share of the result.
// Two all-reduces of (rows + cols) x r floats per weight instead of one of
// rows x cols. Every rank orthogonalizes and multiplies the same all-reduced
// bits, so all decompress the same gradient.
//
// The factors' layout within a bucket follows PyTorch's (matrices grouped
// by shape, in order of first appearance), so that a Q written by one
// reads the same in the other.
//
// Owns per-bucket buffers and plans and the error of the whole flat buffer.
// Thread safety: as BucketCodec; the accessors below between steps only.
#ifndef COHORT_WORKER_COMM_POWERSGD_CODEC_H_
#define COHORT_WORKER_COMM_POWERSGD_CODEC_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "worker/comm/bucket_codec.h"

namespace cohort {

struct PowerSgdOptions {
  int rank = 1;
  int64_t warmup_steps = 1000;
  double min_compression_rate = 2;
  uint64_t seed = 0;  // of the first Q; the same on every rank
  // Local replicas summed into this rank's gradient (its share of the mean
  // when the error is taken).
  int local_replicas = 1;
};

// A parameter tensor in the flat gradient buffer.
struct FlatTensor {
  int64_t offset = 0;
  int64_t numel = 0;
  int64_t rows = 0;  // its first dimension (numel for a vector)
};

class PowerSgdCodec : public BucketCodec {
 public:
  // `tensors` in flat-buffer order; `flat_count`: the buffer's length.
  PowerSgdCodec(const PowerSgdOptions& options, std::vector<FlatTensor> tensors,
                int64_t flat_count);
  ~PowerSgdCodec() override;

  absl::Status Bind(Communicator* comm, int index, float* data, int64_t begin,
                    int64_t count, int lane) override;
  void BeginStep(int64_t step) override { step_ = step; }
  absl::StatusOr<int64_t> Reduce(int index, float scale) override;

  // The error over the whole flat buffer, then every bucket's Q once set.
  bool CarriesState() const override { return true; }
  std::vector<float> SaveState() const override;
  absl::Status LoadState(std::vector<float> state) override;

  // This rank's error over the whole flat buffer (zeros until the first
  // compressed step).
  absl::Span<float> error() { return absl::MakeSpan(error_); }
  // Every bucket's Q, in bucket order; empty until the first compressed
  // step of each bucket. SetQ marks them set (warm start from it).
  std::vector<float> Qs() const;
  absl::Status SetQs(absl::Span<const float> qs);
  int64_t q_count() const;

 private:
  struct Bucket;
  const PowerSgdOptions options_;
  const std::vector<FlatTensor> tensors_;
  std::vector<float> error_;
  int64_t step_ = 0;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  // Factors loaded before the buckets were bound, taken by Bind.
  std::vector<float> pending_q_;
  int64_t bound_q_ = 0;  // factors of the buckets bound so far

  void Layout(Bucket& b, int64_t begin, int64_t count) const;
  void PrepareQ(Bucket& b, int index);
  void Compress(Bucket& b, float scale);
};

}  // namespace cohort

#endif  // COHORT_WORKER_COMM_POWERSGD_CODEC_H_
