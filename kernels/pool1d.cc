#include "kernels/pool1d.h"

#include <algorithm>
#include <cstring>

namespace cohort {
namespace {

// The window of output o, clipped to the row: [begin, end).
inline void Window(const Pool1dGeometry& g, int64_t o, int64_t* begin,
                   int64_t* end) {
  const int64_t start = o * g.stride - g.padding;
  *begin = std::max<int64_t>(start, 0);
  *end = std::min<int64_t>(start + g.kernel, g.in_l);
}

}  // namespace

template <typename T>
void MaxPool1dForward(const Pool1dGeometry& g, const T* in, T* out,
                      int32_t* argmax) {
  for (int64_t p = 0; p < g.planes; ++p) {
    const T* row = in + p * g.in_l;
    T* o_row = out + p * g.out_l;
    int32_t* a_row = argmax + p * g.out_l;
    for (int64_t o = 0; o < g.out_l; ++o) {
      int64_t b, e;
      Window(g, o, &b, &e);
      // padding <= kernel / 2 keeps every window non-empty.
      T best = row[b];
      int64_t at = b;
      for (int64_t l = b + 1; l < e; ++l) {
        if (row[l] > best) best = row[l], at = l;
      }
      o_row[o] = best;
      a_row[o] = static_cast<int32_t>(at);
    }
  }
}

template <typename T>
void MaxPool1dBackward(const Pool1dGeometry& g, const T* grad_out,
                       const int32_t* argmax, T* grad_in) {
  std::memset(grad_in, 0, sizeof(T) * g.planes * g.in_l);
  for (int64_t p = 0; p < g.planes; ++p) {
    T* row = grad_in + p * g.in_l;
    const T* go = grad_out + p * g.out_l;
    const int32_t* a = argmax + p * g.out_l;
    for (int64_t o = 0; o < g.out_l; ++o) row[a[o]] += go[o];
  }
}

template <typename T>
void AvgPool1dForward(const Pool1dGeometry& g, const T* in, T* out) {
  const T inv = T(1) / static_cast<T>(g.kernel);
  for (int64_t p = 0; p < g.planes; ++p) {
    const T* row = in + p * g.in_l;
    T* o_row = out + p * g.out_l;
    for (int64_t o = 0; o < g.out_l; ++o) {
      int64_t b, e;
      Window(g, o, &b, &e);
      T sum = 0;
      for (int64_t l = b; l < e; ++l) sum += row[l];
      o_row[o] = sum * inv;
    }
  }
}

template <typename T>
void AvgPool1dBackward(const Pool1dGeometry& g, const T* grad_out, T* grad_in) {
  std::memset(grad_in, 0, sizeof(T) * g.planes * g.in_l);
  const T inv = T(1) / static_cast<T>(g.kernel);
  for (int64_t p = 0; p < g.planes; ++p) {
    T* row = grad_in + p * g.in_l;
    const T* go = grad_out + p * g.out_l;
    for (int64_t o = 0; o < g.out_l; ++o) {
      int64_t b, e;
      Window(g, o, &b, &e);
      const T v = go[o] * inv;
      for (int64_t l = b; l < e; ++l) row[l] += v;
    }
  }
}

#define COHORT_POOL1D(T)                                                  \
  template void MaxPool1dForward<T>(const Pool1dGeometry&, const T*, T*,  \
                                    int32_t*);                            \
  template void MaxPool1dBackward<T>(const Pool1dGeometry&, const T*,     \
                                     const int32_t*, T*);                 \
  template void AvgPool1dForward<T>(const Pool1dGeometry&, const T*, T*); \
  template void AvgPool1dBackward<T>(const Pool1dGeometry&, const T*, T*);
COHORT_POOL1D(float)
COHORT_POOL1D(double)
#undef COHORT_POOL1D

}  // namespace cohort
