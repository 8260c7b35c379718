// The zoo's model definitions, as layer specs: which layers each named
// model has and the per-sample input shape it was designed for.
//
// Zoo models (per-sample input shape in brackets):
//   mlp_seed       [100]         linear 100-200-10
//   mlp_mnist      [1, 28, 28]   flatten, linear 784-256-128-10
//   lenet5         [1, 28, 28]   conv 1-6 k5 p2, pool, conv 6-16 k5, pool,
//                                fc 400-120-84-10 (ReLU throughout)
//   lenet_cifar    [3, 32, 32]   conv 3-6 k5, pool, conv 6-16 k5, pool,
//                                fc 400-120-84-10
//   conv1d_bn      [3, 10000]    conv1d 3-16-32-3, k3 p1, BatchNorm + ReLU
//                                after the first two
//   resnet18_cifar [3, 32, 32]   ResNet-18 for 32x32 inputs (3x3 stem, no
//                                stem pooling), 10 classes
//   resnet50       [3, 224, 224] torchvision's ResNet-50: conv 7x7 s2 p3,
//                                BN, ReLU, maxpool k3 s2 p1, bottleneck
//                                stages [3, 4, 6, 3] of 256-512-1024-2048,
//                                global average pool, fc 2048-1000
//   gpt_tiny       [1, L]        byte-level GPT: embedding(256, 256),
//                                positional embedding {L, 256}, 4 pre-norm
//                                transformer blocks of 4 heads, per-position
//                                layer norm, head tied to the embedding;
//                                designed for L = 256, takes any L
//   vit_tiny       [3, 224, 224] vision transformer: conv 3-192 k16 s16
//                                (patches), to_sequence, positional
//                                embedding {196, 192}, 4 bidirectional
//                                pre-norm blocks of 3 heads (MLP 768),
//                                per-position layer norm, mean over the
//                                patches, fc 192-1000
//   dlrm_small     [65]          DLRM for Criteo data (table_rows: 32768):
//                                dense features 13-64-16, 26 embedding
//                                tables of 32768 x 16, dot interaction,
//                                top MLP 367-128-64-1 (ReLU throughout)
//
// They live here, below the engines (worker/zoo.h builds their layers), so
// that the spec validator, the coordinator and the parameter-server shards
// can size a zoo model without building it (common/model_sizes.h).
//
// All functions are thread-safe (they share no mutable state).
#ifndef COHORT_COMMON_ZOO_SPECS_H_
#define COHORT_COMMON_ZOO_SPECS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tensor.h"
#include "proto/job.pb.h"

namespace cohort {

// The names ModelSpec.zoo accepts.
std::vector<std::string> ZooModelNames();

// The per-sample input shape a zoo model was designed for. NotFound lists
// the zoo names when the name is unknown.
absl::StatusOr<Shape> ZooInputShape(const std::string& name);

// The input shape a zoo model takes on data of per-sample shape `data`:
// the designed shape, except that sequence models (gpt_tiny) take token
// windows {1, L} of the data's length L. Compare the data's shape with this
// one to refuse data that does not fit.
absl::StatusOr<Shape> ZooInputShape(const std::string& name, const Shape& data);

// The layer list of `spec`: a zoo model's definition, or the explicit list.
// NotFound lists the zoo names when the name is unknown. Every engine (CPU
// and GPU) builds its layers from these.
absl::StatusOr<std::vector<LayerSpec>> LayerSpecs(const ModelSpec& spec);

}  // namespace cohort

#endif  // COHORT_COMMON_ZOO_SPECS_H_
