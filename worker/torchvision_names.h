// torchvision's state_dict names for the layers of a ResNet written as
// cohort layers (the zoo's resnet18_cifar and resnet50, or a spec of the
// same shape): "conv1", "bn1", "layer1.0" ... "layer4.2", "fc", where
// cohort's own names are the layer indices "0", "1", "4" ... "21". The
// names inside a residual block (conv1, bn1, ..., downsample.0) are
// torchvision's already.
//
// Thread safety: plain functions.
#ifndef COHORT_WORKER_TORCHVISION_NAMES_H_
#define COHORT_WORKER_TORCHVISION_NAMES_H_

#include <map>
#include <string>
#include <vector>

#include "proto/job.pb.h"

namespace cohort {

// Layer index -> torchvision's module name, for a list that starts with a
// conv2d and a batchnorm2d and holds residual blocks; empty for any other
// list. A new stage (layerN) starts at each block whose out_channels
// differs from the block before it; a final linear layer is "fc".
std::map<std::string, std::string> TorchvisionLayerNames(
    const std::vector<LayerSpec>& layers);

// `name` ("4.conv1.weight") under `layers` (from TorchvisionLayerNames):
// "layer1.0.conv1.weight"; "" when its layer has no other name.
std::string TorchvisionName(const std::map<std::string, std::string>& layers,
                            const std::string& name);

}  // namespace cohort

#endif  // COHORT_WORKER_TORCHVISION_NAMES_H_
