// COHORT_WIDE_VECTORS: compiles a function twice, for the build's AVX2 and
// for AVX-512, and lets the dynamic loader pick one per machine when the
// program starts (GCC's target_clones, resolved through an ifunc). The
// build targets AVX2 so that one binary runs on every x86-64 machine of
// this project's kinds; a compute-bound loop (the activations' rational
// functions, say) does twice the elements an instruction on AVX-512, and
// Intel's cores run those instructions at full width.
//
// What to put it on: a function whose hot loops are inlined into it
// (helpers `always_inline`), since only its own body is compiled twice; a
// call out of it runs the callee's single AVX2 version. The choice depends
// on the machine only, so a run repeats bit for bit there at any thread
// count. Clang builds (the fuzz configuration) get the AVX2 version alone.
#ifndef COHORT_KERNELS_WIDE_VECTORS_H_
#define COHORT_KERNELS_WIDE_VECTORS_H_

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define COHORT_WIDE_VECTORS \
  __attribute__((target_clones("arch=x86-64-v4", "default")))
#else
#define COHORT_WIDE_VECTORS
#endif

#endif  // COHORT_KERNELS_WIDE_VECTORS_H_
