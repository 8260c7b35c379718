// Per-layer timing hooks: where a training step's forward and backward time
// goes, layer by layer (--timeline-layers).
//
// A model reports each of its layers' Forward (training mode only) and
// Backward calls to a LayerTrace, and a layer that runs other layers (a
// branch, a residual block) reports theirs, so the spans nest: a container's
// span encloses its sub-layers'. Each span is named by the layer's position
// and Name(), the position spelled as its parameters' names spell it
// ("4.conv1", "7.paths.0.2", "5.downsample.0").
//
// With no trace (the default) a call costs one null check.
//
// Ownership: the trace is borrowed by whoever reports to it and outlives
// them. Thread safety: one replica's thread reports to its own trace.
#ifndef COHORT_WORKER_LAYERS_LAYER_TRACE_H_
#define COHORT_WORKER_LAYERS_LAYER_TRACE_H_

#include <string>
#include <utility>

namespace cohort {

class LayerTrace {
 public:
  virtual ~LayerTrace() = default;
  // A traced call starts; calls nest, so Begin and End pair up like
  // brackets.
  virtual void Begin() = 0;
  // The innermost call still open ends: `name` is "<position> <Name()>".
  virtual void End(const std::string& name, bool backward) = 0;
};

// Runs `call`, reporting it to `trace` when that is not null.
template <typename Call>
void TraceLayerCall(LayerTrace* trace, const std::string& name, bool backward,
                    Call&& call) {
  if (trace == nullptr) {
    std::forward<Call>(call)();
    return;
  }
  trace->Begin();
  std::forward<Call>(call)();
  trace->End(name, backward);
}

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_LAYER_TRACE_H_
