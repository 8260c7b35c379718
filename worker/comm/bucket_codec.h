// BucketCodec: how a BucketReducer moves one bucket when gradients travel
// compressed (worker/comm/half_codec.h, worker/comm/powersgd_codec.h).
//
// Without a codec the reducer all-reduces each bucket as floats and scales
// it. With one, the codec does both: it binds each bucket once (creating
// its collective plans, in the lane's collective order, so every rank binds
// the same buckets in the same order), and per step leaves
// `scale` x (approximately) the sum over ranks in the bucket.
//
// Thread safety: Bind and BeginStep are called from the training thread
// between steps; Reduce from the reducer's lane threads, concurrently for
// different buckets, never twice at once for one bucket.
#ifndef COHORT_WORKER_COMM_BUCKET_CODEC_H_
#define COHORT_WORKER_COMM_BUCKET_CODEC_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/comm/communicator.h"

namespace cohort {

class BucketCodec {
 public:
  virtual ~BucketCodec() = default;

  // Bucket `index` is [data, data + count), the flat buffer's elements from
  // `begin`; it runs on `lane` of `comm`. Called again (for every bucket,
  // from index 0) whenever the buffer is bound anew.
  virtual absl::Status Bind(Communicator* comm, int index, float* data,
                            int64_t begin, int64_t count, int lane) = 0;
  // The step about to run (counts from 0 over the whole run, resumes
  // included): codecs with a warm-up or per-step state key on it.
  virtual void BeginStep(int64_t step) = 0;
  // All-reduces bucket `index` and leaves scale x the sum in it. Returns
  // the bytes this rank handed to the collectives.
  virtual absl::StatusOr<int64_t> Reduce(int index, float scale) = 0;

  // What this rank carries from step to step (PowerSGD's error and
  // factors), for checkpoints and the next generation; empty when nothing.
  // Between steps only. CarriesState: whether there is any, without a copy.
  virtual bool CarriesState() const { return false; }
  virtual std::vector<float> SaveState() const { return {}; }
  // Takes back what SaveState gave, before the step it was saved after;
  // INVALID_ARGUMENT when it does not fit this codec's model.
  virtual absl::Status LoadState(std::vector<float> state) {
    if (state.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(
        "this compression kind carries no state between steps");
  }
};

}  // namespace cohort

#endif  // COHORT_WORKER_COMM_BUCKET_CODEC_H_
