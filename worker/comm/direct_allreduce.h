// DirectAllreduce: a Gloo algorithm for small all-reduces in one message
// latency (used by the Gloo communicator on its synchronous lanes).
//
// Every rank sends its whole buffer to every peer and sums what it
// receives in rank order, so that all ranks get the same bits. Gloo's
// halving-doubling waits for four one-way latencies in a row at two ranks
// (data, a "buffer consumed" notification, data, a notification;
// bench/allreduce_netns.sh counts them at a known link delay). Here each peer
// has two receive buffers, used by alternate runs, which makes the
// notifications unnecessary: a peer sends run k+1's data (into the buffer of
// run k-1) only after it has this rank's run-k data, which this rank sends only
// after it consumed run k-1's. Each rank sends (P-1) x size against
// halving-doubling's 2(P-1)/P x size: the same at P = 2, more beyond, where it
// is used for small sizes only (UseDirect). Scratch: two receive buffers per
// peer.
//
// Not thread-safe: one instance is run by one thread at a time, like every
// Gloo algorithm; it owns its scratch and borrows `data` for its lifetime.
#ifndef COHORT_WORKER_COMM_DIRECT_ALLREDUCE_H_
#define COHORT_WORKER_COMM_DIRECT_ALLREDUCE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "gloo/algorithm.h"
#include "gloo/context.h"
#include "gloo/transport/buffer.h"

namespace cohort {

// T: float, or a 16-bit word (half_words.h) summed by `sum`.
template <typename T>
class DirectAllreduceOf : public gloo::Algorithm {
 public:
  // Throws as Gloo does.
  DirectAllreduceOf(const std::shared_ptr<gloo::Context>& context, T* data,
                    int count, const gloo::ReductionFunction<T>* sum);

  void run() override;

 private:
  T* const data_;
  const int count_;
  const gloo::ReductionFunction<T>* const sum_;
  int64_t runs_ = 0;
  // Per run parity, per peer (empty for this rank).
  std::vector<std::vector<T>> scratch_[2];
  std::vector<std::unique_ptr<gloo::transport::Buffer>> send_[2];
  std::vector<std::unique_ptr<gloo::transport::Buffer>> recv_[2];
};

using DirectAllreduce = DirectAllreduceOf<float>;

// Whether a synchronous all-reduce of `bytes` per rank of a world of `size`
// takes DirectAllreduce: at two ranks always (same bytes on the wire, a
// quarter of the latencies); beyond, while the extra bytes cost less than
// the saved latencies.
bool UseDirect(int size, int64_t bytes);

}  // namespace cohort

#endif  // COHORT_WORKER_COMM_DIRECT_ALLREDUCE_H_
