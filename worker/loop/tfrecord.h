// TFRecord framing: the container of TensorFlow's record files and of
// TensorBoard's event files (worker/loop/tfevents.h). Each record is
//
//   uint64  length of the data, little-endian
//   uint32  masked CRC-32C of those 8 bytes, little-endian
//   bytes   the data
//   uint32  masked CRC-32C of the data, little-endian
//
// with the mask of common/crc32c.h (MaskCrc32c). Pure and thread-safe.
#ifndef COHORT_WORKER_LOOP_TFRECORD_H_
#define COHORT_WORKER_LOOP_TFRECORD_H_

#include <string>

#include "absl/strings/string_view.h"

namespace cohort {

// Appends `data`, framed as one record, to *out.
void AppendTfRecord(absl::string_view data, std::string* out);

}  // namespace cohort

#endif  // COHORT_WORKER_LOOP_TFRECORD_H_
