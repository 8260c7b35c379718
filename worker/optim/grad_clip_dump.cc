// Clips the floats read from stdin as a CPU replica clips its gradient
// (optimizer.clip_grad_value, then clip_grad_norm over pieces of the given
// size), and prints the norm before clip_grad_norm and the clipped values,
// one per line, for tests/grad_clip_torch_test.sh.
//
//   grad_clip_dump MAX_NORM MAX_VALUE PIECE < floats
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "worker/optim/grad_clip.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s MAX_NORM MAX_VALUE PIECE < floats\n",
                 argv[0]);
    return 2;
  }
  const double max_norm = std::strtod(argv[1], nullptr);
  const float max_value = std::strtof(argv[2], nullptr);
  const long piece = std::max(1L, std::strtol(argv[3], nullptr, 10));
  std::vector<float> g;
  float x;
  while (std::scanf("%f", &x) == 1) g.push_back(x);
  if (max_value > 0) {
    for (float& v : g) v = std::min(max_value, std::max(-max_value, v));
  }
  std::vector<double> squares;
  for (size_t i = 0; i < g.size(); i += piece) {
    const size_t n = std::min<size_t>(piece, g.size() - i);
    squares.push_back(cohort::SumOfSquares(g.data() + i, n));
  }
  double total = 0;
  for (double s : squares) total += s;
  std::printf("%.9g\n", std::sqrt(total));
  const float scale = max_norm > 0 ? cohort::ClipScale(squares, max_norm) : 1;
  for (float v : g) std::printf("%.9g\n", v * scale);
  return 0;
}
