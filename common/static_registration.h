// File-scope registration at load time, for the registries that each
// layer kind's files add themselves to (common/layer_kind.h,
// worker/layer_registry.h, worker/onnx_layer_registry.h and the GPU
// plugin's worker/gpu/layers/gpu_layer_registry.h).
//
// COHORT_STATIC_REGISTRATION(call) defines a static whose initialiser
// evaluates `call` (which returns something convertible to bool) before
// main. Nothing refers to that static, so the libraries holding such files
// are linked whole (alwayslink). One registration per line of a file.
#ifndef COHORT_COMMON_STATIC_REGISTRATION_H_
#define COHORT_COMMON_STATIC_REGISTRATION_H_

// The extra levels expand __LINE__ before it is pasted into the name.
#define COHORT_STATIC_REGISTRATION(...) \
  COHORT_STATIC_REGISTRATION_AT(__LINE__, __VA_ARGS__)
#define COHORT_STATIC_REGISTRATION_AT(line, ...) \
  COHORT_STATIC_REGISTRATION_NAMED(line, __VA_ARGS__)
#define COHORT_STATIC_REGISTRATION_NAMED(line, ...) \
  [[maybe_unused]] static const bool cohort_registration_##line = (__VA_ARGS__)

#endif  // COHORT_COMMON_STATIC_REGISTRATION_H_
