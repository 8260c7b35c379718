#include "common/worker_progress_metrics.h"

#include <utility>
#include <vector>

namespace cohort {
namespace {

using Type = PrometheusText::Type;

constexpr char kStepSeconds[] = "cohort_worker_step_seconds";

// The step-time phases, as label values and their StepTimes field.
const std::vector<std::pair<const char*, double (StepTimes::*)() const>>&
Phases() {
  static const auto* phases =
      new std::vector<std::pair<const char*, double (StepTimes::*)() const>>{
          {"data", &StepTimes::data_s},
          {"compute", &StepTimes::compute_s},
          {"comm_wait", &StepTimes::comm_wait_s},
          {"optimizer", &StepTimes::optimizer_s},
      };
  return *phases;
}

}  // namespace

void DeclareWorkerProgress(PrometheusText& t) {
  t.Declare("cohort_worker_step", Type::kGauge,
            "Training steps the worker has taken.");
  t.Declare("cohort_worker_epoch", Type::kGauge,
            "The epoch the worker is training (from 0).");
  t.Declare("cohort_worker_loss", Type::kGauge,
            "The worker's training loss at its latest step.");
  t.Declare("cohort_worker_learning_rate", Type::kGauge,
            "The learning rate of the worker's latest step (schedule and "
            "optimizer.scale_lr_with_world applied).");
  t.Declare("cohort_worker_grad_norm", Type::kGauge,
            "The L2 norm of the latest step's averaged gradient, before "
            "clipping (all-reduce mode).");
  t.Declare("cohort_worker_samples_per_second", Type::kGauge,
            "The worker's training throughput over its last reporting "
            "window.");
  t.Declare(kStepSeconds, Type::kGauge,
            "Mean seconds per step over the last reporting window, by phase "
            "(data loading, forward and backward, waiting for the gradient "
            "all-reduce, optimizer).");
  t.Declare("cohort_worker_allreduced_bytes_total", Type::kCounter,
            "Gradient bytes the worker has handed to all-reduces (compressed, "
            "with compression).");
  t.Declare("cohort_worker_allreduce_bus_bandwidth_bytes_per_second",
            Type::kGauge,
            "All-reduce bus bandwidth over the last reporting window.");
  t.Declare("cohort_worker_test_accuracy", Type::kGauge,
            "Test accuracy (0..1) after the newest evaluated epoch.");
  t.Declare("cohort_worker_finished_epochs", Type::kGauge,
            "Epochs the worker has finished.");
  t.Declare("cohort_worker_test_metric", Type::kGauge,
            "Every metric of the newest evaluated epoch, by name (loss, "
            "accuracy, top5_accuracy; loss, mse, mae, r2 for regression; "
            "loss, accuracy, auc, normalized_entropy for BCE_WITH_LOGITS on "
            "one target).");
  t.Declare("cohort_worker_best_metric", Type::kGauge,
            "The best evaluation so far by eval.metric (label metric), as "
            "early stopping and keep_best see it.");
  t.Declare("cohort_worker_best_step", Type::kGauge,
            "The step of the best evaluation so far (label metric).");
  t.Declare("cohort_skipped_samples_total", Type::kCounter,
            "Samples that failed to read and were replaced "
            "(data.skip_bad_samples).");
}

void AddWorkerProgress(PrometheusText& t, const PrometheusLabels& labels,
                       const WorkerProgress& p) {
  t.Add("cohort_worker_step", labels, p.step());
  t.Add("cohort_worker_epoch", labels, p.epoch());
  t.Add("cohort_worker_loss", labels, p.loss());
  t.Add("cohort_worker_samples_per_second", labels, p.samples_per_s());
  t.Add("cohort_worker_learning_rate", labels, p.lr());
  if (p.has_grad_norm())
    t.Add("cohort_worker_grad_norm", labels, p.grad_norm());
  for (const auto& [phase, field] : Phases()) {
    PrometheusLabels l = labels;
    l.emplace_back("phase", phase);
    t.Add(kStepSeconds, l, (p.times().*field)());
  }
  t.Add("cohort_worker_allreduced_bytes_total", labels, p.bytes_allreduced());
  t.Add("cohort_worker_allreduce_bus_bandwidth_bytes_per_second", labels,
        p.busbw_gbps() * 1e9);
  if (p.finished_epoch() > 0 && p.finished_epoch_test_accuracy() >= 0) {
    t.Add("cohort_worker_test_accuracy", labels,
          p.finished_epoch_test_accuracy());
  }
  t.Add("cohort_worker_finished_epochs", labels, p.finished_epoch());
  for (const Metric& m : p.finished_epoch_test_metrics()) {
    PrometheusLabels l = labels;
    l.emplace_back("metric", m.name());
    t.Add("cohort_worker_test_metric", l, m.value());
  }
  if (p.best_step() > 0 && !p.best_metric_name().empty()) {
    PrometheusLabels l = labels;
    l.emplace_back("metric", p.best_metric_name());
    t.Add("cohort_worker_best_metric", l, p.best_metric());
    t.Add("cohort_worker_best_step", l, p.best_step());
  }
  t.Add("cohort_skipped_samples_total", labels, p.skipped_samples());
}

}  // namespace cohort
