// The defaults ParseJobSpec fills into a checked spec (spec.h).
#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/spec.h"

namespace cohort {
namespace {

void FillLayerDefaults(LayerSpec* l) {
  switch (l->kind_case()) {
    case LayerSpec::kConv1D:
    case LayerSpec::kConv2D: {
      ConvSpec* c = l->has_conv1d() ? l->mutable_conv1d() : l->mutable_conv2d();
      if (c->stride() == 0) c->set_stride(1);
      break;
    }
    case LayerSpec::kBatchnorm1D:
    case LayerSpec::kBatchnorm2D: {
      BatchNormSpec* b = l->has_batchnorm1d() ? l->mutable_batchnorm1d()
                                              : l->mutable_batchnorm2d();
      if (b->eps() == 0) b->set_eps(1e-5f);
      if (b->momentum() == 0) b->set_momentum(0.1f);
      break;
    }
    case LayerSpec::kMaxpool2D:
    case LayerSpec::kAvgpool2D: {
      PoolSpec* p =
          l->has_maxpool2d() ? l->mutable_maxpool2d() : l->mutable_avgpool2d();
      if (p->stride() == 0) p->set_stride(p->kernel());
      break;
    }
    case LayerSpec::kResidual:
      if (l->residual().stride() == 0) l->mutable_residual()->set_stride(1);
      break;
    default:
      break;
  }
}

void FillSyntheticDefaults(uint64_t job_seed, SyntheticSpec* y) {
  if (y->shape_size() == 0) {
    for (int64_t d : {1, 28, 28}) y->add_shape(d);
  }
  if (y->classes() == 0) y->set_classes(10);
  if (y->train_samples() == 0) y->set_train_samples(8192);
  if (y->test_samples() == 0) y->set_test_samples(2048);
  if (y->noise() == 0) y->set_noise(1.0f);
  if (y->seed() == 0) y->set_seed(job_seed);
}

void FillPsDefaults(PsSpec* p) {
  if (p->shards() == 0) p->set_shards(1);
  if (p->consistency() == SSP && p->staleness() == 0) p->set_staleness(2);
  if (p->partition_bytes() == 0) p->set_partition_bytes(4 << 20);
  if (p->rpc_timeout_ms() == 0) p->set_rpc_timeout_ms(30000);
}

}  // namespace

bool HasFloatTargets(const DatasetSpec& d) {
  switch (d.kind()) {
    case DatasetSpec::NUMPY:
      return d.numpy().target_shape_size() > 0;
    case DatasetSpec::CSV:
      return d.csv().regression();
    default:
      return false;
  }
}

void FillJobDefaults(JobSpec* j) {
  FillClusterDefaults(j->mutable_cluster());
  if (j->checkpoint().keep() == 0) j->mutable_checkpoint()->set_keep(3);
  FillPsDefaults(j->mutable_ps());
  if (j->name().empty()) j->set_name("job");
  for (LayerSpec& l : *j->mutable_model()->mutable_layers()) {
    FillLayerDefaults(&l);
  }
  DatasetSpec* d = j->mutable_data();
  if (d->loader_threads() == 0) d->set_loader_threads(1);
  if (d->prefetch() == 0) d->set_prefetch(2);
  if (d->kind() == DatasetSpec::SYNTHETIC) {
    FillSyntheticDefaults(j->seed(), d->mutable_synthetic());
  }
  if (!j->has_loss()) {
    j->set_loss(HasFloatTargets(*d) ? MSE : CROSS_ENTROPY);
  }
  if (j->loss() == HUBER && j->huber_delta() == 0) j->set_huber_delta(1);
  OptimizerSpec* o = j->mutable_optimizer();
  if (o->kind() != OptimizerSpec::SGD) {
    if (o->beta1() == 0) o->set_beta1(0.9f);
    if (o->beta2() == 0) o->set_beta2(0.999f);
    if (o->eps() == 0) o->set_eps(1e-8f);
  }
  // Evaluation keeps no activations for backward, so a few training
  // batches' worth fits wherever training fits; more only costs memory.
  if (j->eval().batch_size() == 0) {
    j->mutable_eval()->set_batch_size(
        std::min<int64_t>(1000, 4 * int64_t{j->batch_size()}));
  }
}

void FillClusterDefaults(ClusterSpec* c) {
  if (c->min_workers() == 0) c->set_min_workers(1);
  if (c->max_workers() == 0) c->set_max_workers(c->min_workers());
  if (c->last_call_ms() == 0) c->set_last_call_ms(2000);
  if (c->join_timeout_ms() == 0) c->set_join_timeout_ms(60000);
  if (c->heartbeat_interval_ms() == 0) c->set_heartbeat_interval_ms(1000);
  if (c->heartbeat_misses() == 0) c->set_heartbeat_misses(3);
  if (c->bucket_bytes() == 0) c->set_bucket_bytes(25 << 20);
  if (c->allreduce_algorithm().empty()) {
    c->set_allreduce_algorithm("halving_doubling");
  }
  if (c->collective_timeout_ms() == 0) c->set_collective_timeout_ms(30000);
  if (c->nccl_algorithm().empty()) c->set_nccl_algorithm("flat");
  if (c->coordinator_grace_ms() == 0) c->set_coordinator_grace_ms(60000);
  if (!c->has_max_restarts()) c->set_max_restarts(3);
}

}  // namespace cohort
