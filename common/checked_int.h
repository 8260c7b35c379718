// Overflow-checked 64-bit sizes, for arithmetic on numbers a user wrote.
//
// A job spec may ask for a layer of 2^31 outputs over an input of 2^40
// features, or a data set of 10^11 samples: multiplying such numbers with
// plain int64_t wraps (undefined behaviour, in practice a small or negative
// size that a later allocation trusts). A CheckedInt instead remembers that
// it overflowed, and the overflow sticks through later + and *, so a chain
// of arithmetic needs one check at its end, where the caller can name what
// was being computed.
//
// Meant for non-negative values: sizes and counts.
//
// Ownership: a value type. Thread safety: as int64_t.
#ifndef COHORT_COMMON_CHECKED_INT_H_
#define COHORT_COMMON_CHECKED_INT_H_

#include <cstdint>
#include <limits>

namespace cohort {

class CheckedInt {
 public:
  constexpr CheckedInt() = default;
  // Implicit: sizes mix freely with the checked ones.
  constexpr CheckedInt(int64_t v) : value_(v) {}  // NOLINT

  // A value past int64_t's range.
  static constexpr CheckedInt Overflow() {
    CheckedInt c;
    c.overflow_ = true;
    return c;
  }

  constexpr bool overflow() const { return overflow_; }
  // The value; std::numeric_limits<int64_t>::max() once overflowed, so that
  // a comparison with any real amount says "too much".
  constexpr int64_t value() const {
    return overflow_ ? std::numeric_limits<int64_t>::max() : value_;
  }

  friend CheckedInt operator+(CheckedInt a, CheckedInt b) {
    int64_t r;
    if (a.overflow_ || b.overflow_ ||
        __builtin_add_overflow(a.value_, b.value_, &r)) {
      return Overflow();
    }
    return CheckedInt(r);
  }
  friend CheckedInt operator*(CheckedInt a, CheckedInt b) {
    int64_t r;
    // 0 * overflow is still "too much": the overflow happened somewhere.
    if (a.overflow_ || b.overflow_ ||
        __builtin_mul_overflow(a.value_, b.value_, &r)) {
      return Overflow();
    }
    return CheckedInt(r);
  }
  CheckedInt& operator+=(CheckedInt b) { return *this = *this + b; }
  CheckedInt& operator*=(CheckedInt b) { return *this = *this * b; }

  // Orders by value(), an overflow above everything.
  friend bool operator<(CheckedInt a, CheckedInt b) {
    if (a.overflow_ || b.overflow_) return !a.overflow_ && b.overflow_;
    return a.value_ < b.value_;
  }
  friend bool operator>(CheckedInt a, CheckedInt b) { return b < a; }
  friend bool operator==(CheckedInt a, CheckedInt b) {
    return a.overflow_ == b.overflow_ && (a.overflow_ || a.value_ == b.value_);
  }
  friend bool operator!=(CheckedInt a, CheckedInt b) { return !(a == b); }

 private:
  int64_t value_ = 0;
  bool overflow_ = false;
};

// (x + m - 1) / m * m for m > 0, checked.
inline CheckedInt RoundUpTo(CheckedInt x, int64_t m) {
  if (x.overflow()) return x;
  const CheckedInt up = x + (m - 1);
  if (up.overflow()) return up;
  return CheckedInt(up.value() / m * m);
}

}  // namespace cohort

#endif  // COHORT_COMMON_CHECKED_INT_H_
