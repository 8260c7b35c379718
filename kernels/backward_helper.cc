#include "kernels/backward_helper.h"

#include <omp.h>

#include <thread>
#include <utility>

#include "kernels/onednn_threads.h"

namespace cohort {
namespace {

thread_local BackwardHelper* t_current = nullptr;

// One turn of a wait: a few spins, where a task is usually a few
// microseconds away, then yields, so that a loaded machine's other work
// gets the core.
void Relax(int* spins) {
  if (++*spins < 256) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    return;
  }
  std::this_thread::yield();
}

}  // namespace

bool BackwardHelper::Run(const std::function<void(BackwardHelper&)>& body) {
  if (omp_in_parallel()) return false;
  ApplyOnednnThreads();
  if (omp_get_max_threads() != 2) return false;
  BackwardHelper helper;
#pragma omp parallel num_threads(2)
  {
    const OnednnAlone alone;
    ApplyOnednnThreads();
    if (omp_get_thread_num() == 0) {
      helper.inline_ = omp_get_num_threads() < 2;
      t_current = &helper;
      body(helper);
      helper.Finish();
      t_current = nullptr;
    } else {
      helper.Serve();
    }
  }
  return true;
}

BackwardHelper* BackwardHelper::Current() { return t_current; }

void BackwardHelper::Push(Task task) {
  ++pushed_;
  if (inline_) {
    task();
    done_.fetch_add(1, std::memory_order_release);
    return;
  }
  {
    const std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
  }
  waiting_.fetch_add(1, std::memory_order_release);
}

void BackwardHelper::Wait(int64_t count) const {
  int spins = 0;
  while (done() < count) Relax(&spins);
}

void BackwardHelper::Finish() {
  closed_.store(true, std::memory_order_release);
  Task task;
  while (Take(/*newest=*/true, &task)) {
    task();
    done_.fetch_add(1, std::memory_order_release);
  }
  Wait(pushed_);
}

bool BackwardHelper::Take(bool newest, Task* task) {
  const std::lock_guard<std::mutex> lock(mu_);
  if (queue_.empty()) return false;
  if (newest) {
    *task = std::move(queue_.back());
    queue_.pop_back();
  } else {
    *task = std::move(queue_.front());
    queue_.pop_front();
  }
  waiting_.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

void BackwardHelper::Serve() {
  int spins = 0;
  for (;;) {
    // Read before the queue: once closed, no task comes.
    const bool closed = closed_.load(std::memory_order_acquire);
    Task task;
    if (waiting_.load(std::memory_order_acquire) > 0 &&
        Take(/*newest=*/false, &task)) {
      task();
      done_.fetch_add(1, std::memory_order_release);
      spins = 0;
      continue;
    }
    if (closed) return;
    Relax(&spins);
  }
}

}  // namespace cohort
