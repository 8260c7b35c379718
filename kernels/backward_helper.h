// A second thread for a backward pass on a compute team of two.
//
// A layer's weight gradient needs its output gradient and its saved input,
// and nothing that the layers below it compute; the input gradient is what
// those layers wait for. On a team of two, BackwardHelper::Run runs the
// backward pass on the calling thread (the chain) while a helper thread
// runs the weight gradients that layers hand it with Push, each as soon as
// the helper is free. Each thread runs its kernels on itself alone: on
// small maps one thread runs a kernel at nearly its full speed, where one
// pass split over two threads waits for both at every barrier.
//
// The caller keeps everything a task reads or writes alive and unchanged by
// others until the task is done (Wait); Run returns only after every task.
//
// Thread safety: Push, pushed, done, Wait and Finish are for the chain
// thread, the one running Run's body. Tasks run on the helper one at a time
// in the order pushed, except that Finish runs those not yet started on the
// chain as well: a task must give the same result on either thread.
#ifndef COHORT_KERNELS_BACKWARD_HELPER_H_
#define COHORT_KERNELS_BACKWARD_HELPER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>

namespace cohort {

class BackwardHelper {
 public:
  using Task = std::function<void()>;

  // Runs body(helper) on the calling thread with a helper thread beside it,
  // each holding an OnednnAlone, and returns true once body and every task
  // it pushed are done. Returns false without running body unless the
  // compute team (kernels/onednn_threads.h) is exactly two threads and the
  // caller is outside any parallel region. Should OpenMP give the region
  // one thread, tasks run on the chain as they are pushed.
  static bool Run(const std::function<void(BackwardHelper&)>& body);

  // The helper of the Run body executing on this thread, else null.
  static BackwardHelper* Current();

  // Queues `task` for the helper.
  void Push(Task task);
  // Tasks pushed so far, and tasks the helper has finished: the first
  // done() tasks pushed, until Finish.
  int64_t pushed() const { return pushed_; }
  int64_t done() const { return done_.load(std::memory_order_acquire); }
  // Returns once the first `count` tasks pushed are done.
  void Wait(int64_t count) const;
  // Runs the tasks not yet started on the calling thread too, newest first
  // (the helper takes the oldest), and returns when all are done.
  void Finish();

 private:
  BackwardHelper() = default;
  // Takes the oldest (or the newest) task not yet started; false when
  // there is none.
  bool Take(bool newest, Task* task);
  // The helper thread's loop: tasks until the chain closes the queue.
  void Serve();

  std::mutex mu_;
  std::deque<Task> queue_;           // guarded by mu_
  bool inline_ = false;              // no helper thread: Push runs the task
  std::atomic<bool> closed_{false};  // Finish began: no task comes
  int64_t pushed_ = 0;
  std::atomic<int64_t> waiting_{0};  // pushed and not yet taken
  std::atomic<int64_t> done_{0};
};

}  // namespace cohort

#endif  // COHORT_KERNELS_BACKWARD_HELPER_H_
