// What this machine's cores give a second thread, before any model runs:
// register-only fused multiply-adds (12 independent chains, AVX-512 where
// the CPU has it, else AVX2), so that neither memory nor caches take part.
//
//   core_scaling [ROUNDS]
//
// 1. Gains: the same work on one thread, then split over two threads that
//    meet at a barrier after every unit (an OpenMP parallel region per unit,
//    as a layer split over threads ends in one), then split over two
//    threads that never wait for each other. Units of 1, 0.1 and 0.02 ms;
//    the one-thread time is the mean of a run before and one after, and the
//    median over ROUNDS (default 6) rounds is printed.
// 2. Cores: one thread pinned to each of the first two CPUs, both at once,
//    60 s in windows of 0.5 s: each core's rate, the slower core's, and how
//    many windows had one core more than 15% slower than the other. On a
//    virtual machine whose cores share physical cores with other guests,
//    synchronous work runs at the slower core's pace.
//
// Prints its numbers; exits 1 only if the machine has fewer than 2 CPUs.
#include <immintrin.h>
#include <omp.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

double Now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

// Kept per thread and fed back into the chains' starting values, so that
// the compiler can neither fold the chains together nor drop them.
thread_local float sink = 0;

// The body of Unit512 and Unit256: 12 chains of `reps` multiply-adds each.
// A macro rather than a template, so that each copy is compiled for its
// own instruction set.
#define COHORT_FMA_CHAINS(V, SET, FMA, ADD, reps)                \
  V a[12];                                                       \
  for (int i = 0; i < 12; ++i) a[i] = SET(sink + float(i + 1));  \
  const V m = SET(0.9999999f), b = SET(1e-7f);                   \
  for (long r = 0; r < (reps); ++r) {                            \
    _Pragma("GCC unroll 12") for (int i = 0; i < 12; ++i) a[i] = \
        FMA(a[i], m, b);                                         \
  }                                                              \
  V s = a[0];                                                    \
  for (int i = 1; i < 12; ++i) s = ADD(s, a[i]);                 \
  float lanes[sizeof(V) / sizeof(float)];                        \
  std::memcpy(lanes, &s, sizeof(V));                             \
  sink += lanes[0] * 1e-30f

__attribute__((target("avx512f"))) void Unit512(long reps) {
  COHORT_FMA_CHAINS(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps,
                    reps);
}

__attribute__((target("avx2,fma"))) void Unit256(long reps) {
  COHORT_FMA_CHAINS(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps,
                    reps);
}

const bool kAvx512 = __builtin_cpu_supports("avx512f");

// 12 vector multiply-adds per rep, on the calling thread.
void Unit(long reps) {
  if (kAvx512) {
    Unit512(reps);
  } else {
    Unit256(reps);
  }
}

double VectorFlops() { return 12.0 * 2 * (kAvx512 ? 16 : 8); }

// Reps of one millisecond on one thread.
long RepsPerMs() {
  long reps = 100000;
  const double t0 = Now();
  for (int i = 0; i < 10; ++i) Unit(reps);
  return static_cast<long>(reps * 10 / ((Now() - t0) * 1e3));
}

double OneThread(int units, long reps) {
  const double t0 = Now();
  for (int i = 0; i < units; ++i) Unit(reps);
  return Now() - t0;
}

double TwoThreads(int units, long reps, bool barrier_each_unit) {
  const double t0 = Now();
  if (barrier_each_unit) {
    for (int i = 0; i < units / 2; ++i) {
#pragma omp parallel num_threads(2)
      Unit(reps);
    }
  } else {
#pragma omp parallel num_threads(2)
    for (int i = 0; i < units / 2; ++i) Unit(reps);
  }
  return Now() - t0;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Part 1 for units of `unit_ms`, about 4 s of one-thread work a round.
void Gains(long reps_per_ms, double unit_ms, int rounds) {
  const long reps = static_cast<long>(reps_per_ms * unit_ms);
  const int units = static_cast<int>(4000 / unit_ms);
  std::vector<double> sync, independent;
  for (int r = 0; r < rounds; ++r) {
    const double before = OneThread(units, reps);
    const double with_barriers = TwoThreads(units, reps, true);
    const double without = TwoThreads(units, reps, false);
    const double one = (before + OneThread(units, reps)) / 2;
    sync.push_back(one / with_barriers);
    independent.push_back(one / without);
  }
  std::printf(
      "units of %.2f ms: two threads with a barrier per unit %.2fx one "
      "(%.2f-%.2f), without barriers %.2fx (%.2f-%.2f), median of %d\n",
      unit_ms, Median(sync), *std::min_element(sync.begin(), sync.end()),
      *std::max_element(sync.begin(), sync.end()), Median(independent),
      *std::min_element(independent.begin(), independent.end()),
      *std::max_element(independent.begin(), independent.end()), rounds);
  std::fflush(stdout);
}

void PinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof(set), &set);
}

// Part 2: GFLOP/s of each of the first two CPUs per 0.5 s window.
void Cores(long reps_per_ms) {
  constexpr int kWindows = 120;
  constexpr double kWindow = 0.5;
  std::vector<double> rate[2] = {std::vector<double>(kWindows),
                                 std::vector<double>(kWindows)};
  const long reps = reps_per_ms / 10;
#pragma omp parallel num_threads(2)
  {
    const int t = omp_get_thread_num();
    PinTo(t);
    const double start = Now();
    for (int w = 0; w < kWindows; ++w) {
      long done = 0;
      while (Now() < start + kWindow * (w + 1)) {
        Unit(reps);
        done += reps;
      }
      rate[t][w] = done * VectorFlops() / kWindow / 1e9;
    }
  }
  double sum[2] = {0, 0}, slower = 0;
  int apart = 0;
  for (int w = 0; w < kWindows; ++w) {
    const double lo = std::min(rate[0][w], rate[1][w]);
    const double hi = std::max(rate[0][w], rate[1][w]);
    sum[0] += rate[0][w];
    sum[1] += rate[1][w];
    slower += lo;
    if (lo < 0.85 * hi) ++apart;
  }
  std::printf(
      "cores, 60 s in 0.5 s windows: CPU 0 %.1f GFLOP/s, CPU 1 %.1f, the "
      "slower of the two %.1f; %d of %d windows with one more than 15%% "
      "slower\n",
      sum[0] / kWindows, sum[1] / kWindows, slower / kWindows, apart, kWindows);
}

}  // namespace

int main(int argc, char** argv) {
  if (omp_get_num_procs() < 2) {
    std::fprintf(stderr, "core_scaling: needs at least 2 CPUs\n");
    return 1;
  }
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 6;
  // Calibrated on CPU 0 alone; the original set is restored before the
  // OpenMP team starts, since its threads inherit the creator's.
  cpu_set_t all;
  sched_getaffinity(0, sizeof(all), &all);
  PinTo(0);
  const long reps_per_ms = RepsPerMs();
  std::printf("one core: %.1f GFLOP/s (%s)\n",
              reps_per_ms * VectorFlops() / 1e6, kAvx512 ? "AVX-512" : "AVX2");
  std::fflush(stdout);
  sched_setaffinity(0, sizeof(all), &all);
  for (double unit_ms : {1.0, 0.1, 0.02}) Gains(reps_per_ms, unit_ms, rounds);
  Cores(reps_per_ms);
  return 0;
}
