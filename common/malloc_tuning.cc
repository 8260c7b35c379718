#include "common/malloc_tuning.h"

#include <malloc.h>

#include <cstdlib>

namespace cohort {

void KeepLargeBuffersResident() {
  // A user's own MALLOC_* settings (glibc reads them at startup) win.
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") == nullptr) {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
  }
  if (std::getenv("MALLOC_TRIM_THRESHOLD_") == nullptr) {
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
  }
  if (std::getenv("MALLOC_TOP_PAD_") == nullptr) {
    mallopt(M_TOP_PAD, 64 << 20);
  }
}

}  // namespace cohort
