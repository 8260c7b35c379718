// The defaults ParseJobSpec fills into a checked spec (spec.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/layer_spec_check.h"
#include "common/spec.h"

namespace cohort {
namespace {

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

// PyTorch's PowerSGDState defaults, so that a job moved from
// powerSGD_hook behaves the same.
void FillCompressionDefaults(CompressionSpec* c) {
  if (c->kind() != CompressionSpec::POWERSGD) return;
  if (c->rank() == 0) c->set_rank(1);
  if (!c->has_warmup_steps()) c->set_warmup_steps(1000);
  if (!c->has_min_compression_rate()) c->set_min_compression_rate(2);
}

}  // namespace

bool HasFloatTargets(const DatasetSpec& d) {
  switch (d.kind()) {
    case DatasetSpec::NUMPY:
      return d.numpy().target_shape_size() > 0;
    case DatasetSpec::CSV:
      return d.csv().regression();
    case DatasetSpec::CRITEO:
      return true;
    default:
      return false;
  }
}

void FillJobDefaults(JobSpec* j) {
  FillClusterDefaults(j->mutable_cluster());
  if (j->has_compression()) FillCompressionDefaults(j->mutable_compression());
  if (j->checkpoint().keep() == 0) j->mutable_checkpoint()->set_keep(3);
  if (j->log().every_steps() == 0) j->mutable_log()->set_every_steps(1);
  FillPsDefaults(j->mutable_ps());
  if (j->name().empty()) j->set_name("job");
  for (LayerSpec& l : *j->mutable_model()->mutable_layers()) {
    spec_internal::FillLayerSpecDefaults(&l);
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
  if (d->kind() == DatasetSpec::IMAGE_FOLDER) {
    FillImageFolderDefaults(d->mutable_image_folder());
  }
  if (d->kind() == DatasetSpec::TOKENS) FillTokensDefaults(d->mutable_tokens());
  if (d->kind() == DatasetSpec::CRITEO) FillCriteoDefaults(d->mutable_criteo());
  OptimizerSpec* o = j->mutable_optimizer();
  switch (o->kind()) {
    case OptimizerSpec::ADAM:
    case OptimizerSpec::ADAMW:
    case OptimizerSpec::LAMB:
      if (o->beta1() == 0) o->set_beta1(0.9f);
      if (o->beta2() == 0) o->set_beta2(0.999f);
      // LAMB: 1e-6, as in the paper and the common implementations.
      if (o->eps() == 0) {
        o->set_eps(o->kind() == OptimizerSpec::LAMB ? 1e-6f : 1e-8f);
      }
      break;
    case OptimizerSpec::RMSPROP:
      if (o->alpha() == 0) o->set_alpha(0.99f);
      if (o->eps() == 0) o->set_eps(1e-8f);
      break;
    case OptimizerSpec::LARS:
      if (o->trust_coefficient() == 0) o->set_trust_coefficient(0.001f);
      break;
    case OptimizerSpec::ADAGRAD:
      if (o->eps() == 0) o->set_eps(1e-10f);
      break;
    default:
      break;
  }
  // Evaluation keeps no activations for backward, so a few training
  // batches' worth fits wherever training fits; more only costs memory.
  if (j->eval().batch_size() == 0) {
    j->mutable_eval()->set_batch_size(
        std::min<int64_t>(1000, 4 * int64_t{j->batch_size()}));
  }
}

void FillTokensDefaults(TokensSpec* t) {
  if (t->vocab_size() == 0 && t->format() == TokensSpec::BYTES) {
    t->set_vocab_size(256);
  }
  if (t->stride() == 0) t->set_stride(t->context());
  if (t->test().empty() && t->val_fraction() == 0) t->set_val_fraction(0.1f);
}

void FillCriteoDefaults(CriteoSpec* c) {
  if (c->dense() == 0) c->set_dense(13);
  if (c->categorical() == 0) c->set_categorical(26);
  if (c->test().empty() && c->val_fraction() == 0) c->set_val_fraction(0.1f);
  // One value means every feature's table.
  if (c->table_rows_size() == 1) {
    while (c->table_rows_size() < c->categorical()) {
      c->add_table_rows(c->table_rows(0));
    }
  }
}

void FillImageFolderDefaults(ImageFolderSpec* f) {
  if (f->train().empty()) f->set_train("train");
  if (f->val().empty()) f->set_val("val");
  if (f->image_size() == 0) f->set_image_size(224);
  // torchvision's ImageNet evaluation: Resize(256), CenterCrop(224).
  if (f->resize() == 0) {
    f->set_resize(
        static_cast<int32_t>(std::lround(f->image_size() * 256.0 / 224.0)));
  }
  const bool gray = f->grayscale();
  if (f->mean_size() == 0) {
    if (gray) f->add_mean((0.485f + 0.456f + 0.406f) / 3);
    for (float m : {0.485f, 0.456f, 0.406f}) {
      if (!gray) f->add_mean(m);
    }
  }
  if (f->std_size() == 0) {
    if (gray) f->add_std((0.229f + 0.224f + 0.225f) / 3);
    for (float v : {0.229f, 0.224f, 0.225f}) {
      if (!gray) f->add_std(v);
    }
  }
  // One value means every channel.
  while (f->mean_size() < (gray ? 1 : 3)) f->add_mean(f->mean(0));
  while (f->std_size() < (gray ? 1 : 3)) f->add_std(f->std(0));
  if (f->scale_min() == 0) f->set_scale_min(0.08f);
  if (f->scale_max() == 0) f->set_scale_max(1.0f);
  if (f->ratio_min() == 0) f->set_ratio_min(3.0f / 4);
  if (f->ratio_max() == 0) f->set_ratio_max(4.0f / 3);
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
