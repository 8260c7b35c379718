// The exchange's state between steps (PowerSGD's error feedback), which
// differs from rank to rank and so is not part of the checkpoint rank 0
// writes: each rank keeps its own beside it, as
//   <checkpoint dir>/exchange/rank<R>-of<W>.step<S>.f32
// at the steps every rank knows to be checkpoint steps (checkpoint.
// every_steps, and the last), and the same number of them as checkpoints
// are kept. A rank resuming at such a step, in a world of the same size,
// takes its own back and the run goes on exactly; otherwise (another world
// size, a checkpoint written on time or on a signal) its error feedback
// starts from zero, which it says. A new generation after a failure takes
// the state the survivor held in memory, when it is of the step resumed.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "worker/training_loop.h"

namespace cohort {

std::string TrainingLoop::ExchangeStatePath(int64_t step) const {
  const int rank = dist_ != nullptr ? dist_->rank : 0;
  const int world = dist_ != nullptr ? dist_->world_size : 1;
  return absl::StrCat(checkpoint_dir_, "/exchange/rank", rank, "-of", world,
                      ".step", step, ".f32");
}

absl::Status TrainingLoop::SaveExchangeState(bool final_step) {
  if (checkpoint_dir_.empty() || PsMode()) return absl::OkStatus();
  const int64_t every = spec_.checkpoint().every_steps();
  if (!final_step && (every <= 0 || step_ % every != 0)) {
    return absl::OkStatus();
  }
  if (!exchange_state_steps_.empty() && exchange_state_steps_.back() == step_) {
    return absl::OkStatus();
  }
  const std::vector<float> state = exchange_->SaveState();
  if (state.empty()) return absl::OkStatus();
  const std::string dir = absl::StrCat(checkpoint_dir_, "/exchange");
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot create ", dir,
                     " for the compression state: ", std::strerror(errno)));
  }
  const absl::Status s = WriteFileAtomically(
      ExchangeStatePath(step_),
      absl::string_view(reinterpret_cast<const char*>(state.data()),
                        state.size() * sizeof(float)));
  if (!s.ok()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the compression state of step ", step_, " cannot be written (",
        s.message(), "); the job fails rather than go on unsaved"));
  }
  exchange_state_steps_.push_back(step_);
  const size_t keep = std::max(1, spec_.checkpoint().keep());
  while (exchange_state_steps_.size() > keep) {
    std::remove(ExchangeStatePath(exchange_state_steps_.front()).c_str());
    exchange_state_steps_.erase(exchange_state_steps_.begin());
  }
  return absl::OkStatus();
}

namespace {

std::vector<float> FloatsOf(const std::string& bytes) {
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

}  // namespace

void TrainingLoop::LoadExchangeState() {
  // Nothing to load, or to say, where the exchange carries no state.
  if (step_ == 0 || PsMode() || !exchange_->CarriesState()) return;
  const ElasticState* e = options_.elastic;
  std::vector<float> state;
  std::string from;
  absl::Status s = absl::NotFoundError("none saved");
  if (e != nullptr && e->exchange_step == step_ && !e->exchange_state.empty()) {
    state = e->exchange_state;
    from = "the last generation";
  } else if (!checkpoint_dir_.empty()) {
    const std::string path = ExchangeStatePath(step_);
    absl::StatusOr<std::string> bytes = ReadFile(path);
    if (bytes.ok()) {
      from = path;
      if (bytes->size() % sizeof(float) == 0) {
        state = FloatsOf(*bytes);
      } else {
        s = absl::DataLossError(
            absl::StrCat("the file is damaged: ", bytes->size(),
                         " bytes are not whole floats"));
      }
    }
  }
  const int rank = dist_ != nullptr ? dist_->rank : 0;
  if (!state.empty()) s = exchange_->LoadState(std::move(state));
  if (s.ok()) return;
  std::fprintf(stderr,
               "cohort: rank %d starts compression's error feedback from "
               "zero at step %lld: %s%s\n",
               rank, static_cast<long long>(step_),
               std::string(s.message()).c_str(),
               from.empty() ? "" : absl::StrCat(" (", from, ")").c_str());
}

}  // namespace cohort
