#include "kernels/blocked_weights.h"

#include <vector>

#include "dnnl.hpp"
#include "gtest/gtest.h"
#include "kernels/onednn_threads.h"

namespace cohort {
namespace {

using dnnl::memory;

// oneDNN's own reorder out of OIhw{B}i{B}o: the reference.
std::vector<float> OnednnFromBlocked(const std::vector<float>& blocked,
                                     const memory::dims& dims, int64_t block) {
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const memory::desc from(dims, memory::data_type::f32,
                          block == 16 ? memory::format_tag::ABcd16b16a
                                      : memory::format_tag::ABcd8b8a);
  const memory::desc to(dims, memory::data_type::f32, memory::format_tag::abcd);
  std::vector<float> out(blocked.size());
  memory a(from, engine, const_cast<float*>(blocked.data()));
  memory b(to, engine, out.data());
  dnnl::reorder(a, b).execute(stream, a, b);
  stream.wait();
  return out;
}

TEST(FromBlockedWeights, PlacesEveryValueAsOnednnDoes) {
  struct Case {
    int64_t out, in, block;
  };
  const Case cases[] = {{32, 16, 16}, {64, 48, 16}, {16, 96, 16},
                        {24, 16, 8},  {8, 8, 8},    {512, 256, 16}};
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message()
                 << c.out << "x" << c.in << " in blocks of " << c.block);
    const int64_t n = c.out * c.in;
    std::vector<float> blocked(n);
    for (int64_t i = 0; i < n; ++i) blocked[i] = static_cast<float>(i) + 0.5f;
    const std::vector<float> want =
        OnednnFromBlocked(blocked, {c.out, c.in, 1, 1}, c.block);
    for (int threads : {1, 2}) {
      SetOnednnThreads(threads);
      std::vector<float> got(n, -1.0f);
      FromBlockedWeights(blocked.data(), c.out, c.in, c.block, got.data());
      EXPECT_EQ(got, want) << threads << " threads";
    }
    SetOnednnThreads(0);
  }
}

}  // namespace
}  // namespace cohort
