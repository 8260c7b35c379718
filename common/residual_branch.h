// A residual layer (LayerSpec.residual) written out as the SUM branch and
// ReLU it computes, layer by layer as `cohort import` writes torchvision's
// BasicBlock and Bottleneck. Shape inference sizes the residual layer as
// those layers; the ONNX importer replaces exactly them by the residual
// layer (common/onnx/onnx_import_residual.cc); TrainingHash takes a model
// imported from ONNX in this form, so that the checkpoints of builds that
// kept the branch still resume.
//
// Thread safety: plain functions.
#ifndef COHORT_COMMON_RESIDUAL_BRANCH_H_
#define COHORT_COMMON_RESIDUAL_BRANCH_H_

#include <cstdint>
#include <vector>

#include "proto/job.pb.h"

namespace cohort {

// `residual` over an input of `in_channels`: the SUM branch (the main
// path; the downsample, or nothing when neither the stride nor the width
// changes, torchvision's rule) and the ReLU after it. The sub-layers are named
// "<name>.conv1", "<name>.downsample.0", ... when `residual` has a name,
// else after its tensor_names (an entry "conv1.weight" -> "m.c1.weight"
// names conv1 "m.c1").
std::vector<LayerSpec> ResidualAsBranch(const LayerSpec& residual,
                                        int64_t in_channels);

// The channels of the activations that reach layers[at], where the layers
// before it say: the nearest conv2d or residual layer before it, through
// layers that keep the channels (batch norms, activations, pools,
// dropout). 0 when they do not say.
int64_t ChannelsBefore(
    const google::protobuf::RepeatedPtrField<LayerSpec>& layers, int at);

// Writes out every residual layer of `layers` (top level) whose input
// channels ChannelsBefore knows as ResidualAsBranch.
void ExpandResidualLayers(
    google::protobuf::RepeatedPtrField<LayerSpec>* layers);

}  // namespace cohort

#endif  // COHORT_COMMON_RESIDUAL_BRANCH_H_
