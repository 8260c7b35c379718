// The one broadcast cohort's layers allow: a per-channel gate [C, 1, 1]
// scaling a [C, H, W] activation, as in a MUL branch (squeeze-and-
// excitation). Shared by the shape inference and both engines' branch
// layers so that they cannot disagree.
//
// Header-only pure functions; thread-safe.
#ifndef COHORT_COMMON_BROADCAST_H_
#define COHORT_COMMON_BROADCAST_H_

#include "common/tensor.h"

namespace cohort {

// Whether `s` is a per-channel gate [C, 1, 1].
inline bool IsChannelGate(const Shape& s) {
  return s.size() == 3 && s[1] == 1 && s[2] == 1;
}

// True when a factor of shape `s` combines with `full`, the product's
// shape so far: equal shapes, or a gate [C, 1, 1] against [C, H, W],
// either way round (a gate may come first). Sets *full to the larger shape
// and *grown (when not null) to whether that is `s`.
inline bool FitsProduct(const Shape& s, Shape* full, bool* grown = nullptr) {
  if (grown != nullptr) *grown = false;
  if (s == *full) return true;
  if (s.size() != 3 || full->size() != 3 || s[0] != (*full)[0]) return false;
  if (IsChannelGate(s)) return true;
  if (!IsChannelGate(*full)) return false;
  *full = s;
  if (grown != nullptr) *grown = true;
  return true;
}

}  // namespace cohort

#endif  // COHORT_COMMON_BROADCAST_H_
