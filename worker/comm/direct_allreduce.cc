#include "worker/comm/direct_allreduce.h"

#include <algorithm>

#include "gloo/common/common.h"
#include "gloo/math.h"
#include "worker/comm/half_words.h"

namespace cohort {
namespace {

// Above this many bytes x (P-1), halving-doubling's fewer bytes win at
// more than two ranks.
constexpr int64_t kDirectMaxBytes = int64_t{64} << 10;

}  // namespace

template <typename T>
DirectAllreduceOf<T>::DirectAllreduceOf(
    const std::shared_ptr<gloo::Context>& context, T* data, int count,
    const gloo::ReductionFunction<T>* sum)
    : gloo::Algorithm(context), data_(data), count_(count), sum_(sum) {
  const size_t bytes = sizeof(T) * static_cast<size_t>(count);
  for (int k = 0; k < 2; ++k) {
    const int slot = context_->nextSlot();
    scratch_[k].resize(contextSize_);
    send_[k].resize(contextSize_);
    recv_[k].resize(contextSize_);
    for (int peer = 0; peer < contextSize_; ++peer) {
      if (peer == contextRank_ || count == 0) continue;
      scratch_[k][peer].resize(count);
      send_[k][peer] = getPair(peer)->createSendBuffer(slot, data, bytes);
      recv_[k][peer] = getPair(peer)->createRecvBuffer(
          slot, scratch_[k][peer].data(), bytes);
    }
  }
}

template <typename T>
void DirectAllreduceOf<T>::run() {
  if (count_ == 0 || contextSize_ == 1) return;
  const int k = runs_++ & 1;
  for (auto& buffer : send_[k]) {
    if (buffer) buffer->send();
  }
  for (auto& buffer : recv_[k]) {
    if (buffer) buffer->waitRecv();
  }
  for (auto& buffer : send_[k]) {
    if (buffer) buffer->waitSend();
  }
  // x0 + x1 + ... in rank order. Ranks 0 and 1 add into their own data
  // (x1 + x0 == x0 + x1 exactly); the others sum in peer 0's buffer.
  const auto* sum = sum_;
  std::vector<std::vector<T>>& in = scratch_[k];
  T* acc = contextRank_ <= 1 ? data_ : in[0].data();
  if (contextRank_ <= 1) sum->call(acc, in[1 - contextRank_].data(), count_);
  for (int r = contextRank_ <= 1 ? 2 : 1; r < contextSize_; ++r) {
    sum->call(acc, r == contextRank_ ? data_ : in[r].data(), count_);
  }
  if (acc != data_) std::copy(acc, acc + count_, data_);
}

template class DirectAllreduceOf<float>;
template class DirectAllreduceOf<Fp16Word>;
template class DirectAllreduceOf<Bf16Word>;

bool UseDirect(int size, int64_t bytes) {
  return size == 2 || bytes * (size - 1) <= kDirectMaxBytes;
}

}  // namespace cohort
