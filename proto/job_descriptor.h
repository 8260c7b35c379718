// job.proto as a serialized google.protobuf.FileDescriptorSet with its
// source comments (protoc --include_source_info), compiled into the
// binary so that a user with only `cohort` can read the spec's reference.
// Immutable data; safe from any thread.
#ifndef COHORT_PROTO_JOB_DESCRIPTOR_H_
#define COHORT_PROTO_JOB_DESCRIPTOR_H_

#include <cstddef>

namespace cohort {

extern const unsigned char kJobDescriptor[];
extern const size_t kJobDescriptorSize;

}  // namespace cohort

#endif  // COHORT_PROTO_JOB_DESCRIPTOR_H_
