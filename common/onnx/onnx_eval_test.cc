// The reference evaluator (onnx_eval.h) on small hand-built graphs: values
// checked against hand-computed numbers, torch.onnx.export's shape
// arithmetic, a whole multi-head attention block against a direct
// computation, and the refusals.
#include "common/onnx/onnx_eval.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/onnx/onnx_test_graph.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace onnx_import_internal {
namespace {

using onnx_test::Float;
using onnx_test::Graph;
using onnx_test::Int;
using onnx_test::Ints;
using ::testing::HasSubstr;

using Shape = std::vector<int64_t>;
using Values = std::vector<double>;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

EvalValue Val(Shape dims, Values data, bool integer = false) {
  EvalValue v;
  v.dims = std::move(dims);
  v.data = std::move(data);
  v.integer = integer;
  return v;
}

// 0, 1, 2, ... in `dims`.
EvalValue Iota(Shape dims) {
  EvalValue v;
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  for (int64_t i = 0; i < n; ++i) v.data.push_back(i);
  v.dims = std::move(dims);
  return v;
}

void ExpectValue(const absl::StatusOr<EvalValue>& v, const Shape& dims,
                 const Values& data, double tol = 1e-12) {
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->dims, dims);
  ASSERT_EQ(v->data.size(), data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    if (std::isinf(data[i])) {
      EXPECT_EQ(v->data[i], data[i]) << "element " << i;
    } else {
      EXPECT_NEAR(v->data[i], data[i], tol) << "element " << i;
    }
  }
}

std::string ErrorOf(const absl::StatusOr<EvalValue>& v) {
  EXPECT_FALSE(v.ok());
  if (v.ok()) return "";
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(v.status().message());
}

TEST(OnnxEval, BroadcastsAddAndMul) {
  Graph g;
  const std::string sum = g.Op("Add", {"x", "y"});
  const std::string prod = g.Op("Mul", {"col", "row"});
  Evaluator e(g.graph(), 13);
  e.Set("x", Iota({2, 3}));
  e.Set("y", Val({3}, {10, 20, 30}));
  e.Set("col", Val({2, 1}, {1, 2}));
  e.Set("row", Val({1, 3}, {1, 10, 100}));
  ExpectValue(e.Get(sum), {2, 3}, {10, 21, 32, 13, 24, 35});
  ExpectValue(e.Get(prod), {2, 3}, {1, 10, 100, 2, 20, 200});
  e.Set("y", Val({2}, {1, 2}));
  EXPECT_THAT(ErrorOf(e.Get(sum)),
              HasSubstr("node /Add_1 (Add): shapes [2, 3] and "
                        "[2] do not broadcast"));
}

TEST(OnnxEval, MatMulBatchesAndPromotesVectors) {
  Graph g;
  const std::string four = g.Op("MatMul", {"a4", "b4"});
  const std::string three = g.Op("MatMul", {"a3", "b2"});
  const std::string row = g.Op("MatMul", {"v", "b2"});
  const std::string col = g.Op("MatMul", {"b2", "w"});
  Evaluator e(g.graph(), 13);
  // [2, 1, 1, 2] x [1, 2, 2, 1]: the batch dims broadcast to [2, 2].
  e.Set("a4", Val({2, 1, 1, 2}, {1, 2, 3, 4}));
  e.Set("b4", Val({1, 2, 2, 1}, {1, 0, 0, 1}));
  ExpectValue(e.Get(four), {2, 2, 1, 1}, {1, 2, 3, 4});
  e.Set("a3", Iota({2, 2, 2}));
  e.Set("b2", Val({2, 3}, {1, 0, 1, 0, 1, 1}));
  ExpectValue(e.Get(three), {2, 2, 3}, {0, 1, 1, 2, 3, 5, 4, 5, 9, 6, 7, 13});
  e.Set("v", Val({2}, {2, 3}));
  ExpectValue(e.Get(row), {3}, {2, 3, 5});
  e.Set("w", Val({3}, {1, 2, 3}));
  ExpectValue(e.Get(col), {2}, {4, 5});
}

TEST(OnnxEval, GemmTransposesScalesAndAddsC) {
  Graph g;
  onnx::NodeProto* n = g.Node("Gemm", {"a", "b", "c"});
  Int(n, "transB", 1);
  Float(n, "alpha", 2);
  Evaluator e(g.graph(), 13);
  e.Set("a", Val({2, 3}, {1, 2, 3, 4, 5, 6}));
  e.Set("b", Val({2, 3}, {1, 0, 0, 0, 1, 0}));
  e.Set("c", Val({2}, {10, 20}));
  ExpectValue(e.Get(n->output(0)), {2, 2}, {12, 24, 18, 30});
}

TEST(OnnxEval, SoftmaxAlongAnAxisAndInOpset11sCoercedForm) {
  Graph g;
  const std::string last = g.Op("Softmax", {"x"});
  onnx::NodeProto* one = g.Node("Softmax", {"y"});
  Int(one, "axis", 1);
  Evaluator e13(g.graph(), 13);
  e13.Set("x", Val({2, 2}, {0, std::log(3.0), 0, 0}));
  ExpectValue(e13.Get(last), {2, 2}, {0.25, 0.75, 0.5, 0.5});
  const EvalValue y = Val({1, 2, 2}, {0, 0, 0, std::log(5.0)});
  e13.Set("y", y);
  ExpectValue(e13.Get(one->output(0)), {1, 2, 2}, {0.5, 1.0 / 6, 0.5, 5.0 / 6});
  // Opset 11 flattens [2, 2] from axis 1 into one row of 4.
  Evaluator e11(g.graph(), 11);
  e11.Set("y", y);
  ExpectValue(e11.Get(one->output(0)), {1, 2, 2},
              {1.0 / 8, 1.0 / 8, 1.0 / 8, 5.0 / 8});
}

TEST(OnnxEval, Transposes) {
  Graph g;
  const std::string reversed = g.Op("Transpose", {"x"});
  onnx::NodeProto* n = g.Node("Transpose", {"y"});
  Ints(n, "perm", {2, 0, 1});
  Evaluator e(g.graph(), 13);
  e.Set("x", Iota({2, 3}));
  ExpectValue(e.Get(reversed), {3, 2}, {0, 3, 1, 4, 2, 5});
  e.Set("y", Iota({1, 2, 3}));
  ExpectValue(e.Get(n->output(0)), {3, 1, 2}, {0, 3, 1, 4, 2, 5});
}

TEST(OnnxEval, ReshapeCopiesZerosAndInfersMinusOne) {
  Graph g;
  const std::string flat = g.Op("Reshape", {"x", g.InitInts({0, -1})});
  const std::string back = g.Op("Reshape", {"x", g.InitInts({-1, 2, 0})});
  const std::string bad = g.Op("Reshape", {"x", g.InitInts({5, -1})});
  Evaluator e(g.graph(), 13);
  const EvalValue x = Iota({2, 3, 4});
  e.Set("x", x);
  ExpectValue(e.Get(flat), {2, 12}, x.data);
  ExpectValue(e.Get(back), {3, 2, 4}, x.data);
  EXPECT_THAT(ErrorOf(e.Get(bad)),
              HasSubstr("node /Reshape_3 (Reshape): cannot "
                        "reshape [2, 3, 4] to"));
}

TEST(OnnxEval, GathersAScalarOrAVectorOfIndices) {
  Graph g;
  const std::string row = g.Op("Gather", {"x", g.InitInt(2)});
  const std::string last = g.Op("Gather", {"x", g.InitInt(-1)});
  onnx::NodeProto* cols = g.Node("Gather", {"y", g.InitInts({2, 0})});
  Int(cols, "axis", 1);
  const std::string outside = g.Op("Gather", {"x", g.InitInt(3)});
  Evaluator e(g.graph(), 13);
  e.Set("x", Iota({3, 2}));
  e.Set("y", Iota({2, 3}));
  ExpectValue(e.Get(row), {2}, {4, 5});
  ExpectValue(e.Get(last), {2}, {4, 5});
  ExpectValue(e.Get(cols->output(0)), {2, 2}, {2, 0, 5, 3});
  EXPECT_THAT(ErrorOf(e.Get(outside)), HasSubstr("index 3 is outside axis 0"));
}

TEST(OnnxEval, SplitsInBothOpsetForms) {
  Graph g;
  onnx::NodeProto* by_input = g.Node("Split", {"x", g.InitInts({1, 2})}, 2);
  Int(by_input, "axis", 1);
  onnx::NodeProto* by_attr = g.Node("Split", {"x"}, 2);
  Int(by_attr, "axis", 1);
  Ints(by_attr, "split", {2, 1});
  onnx::NodeProto* equal = g.Node("Split", {"x"}, 3);
  Int(equal, "axis", -1);
  onnx::NodeProto* uneven = g.Node("Split", {"x"}, 2);
  Int(uneven, "axis", 1);
  Int(uneven, "num_outputs", 2);
  const EvalValue x = Iota({2, 3});
  Evaluator e13(g.graph(), 13);
  e13.Set("x", x);
  ExpectValue(e13.Get(by_input->output(0)), {2, 1}, {0, 3});
  ExpectValue(e13.Get(by_input->output(1)), {2, 2}, {1, 2, 4, 5});
  ExpectValue(e13.Get(equal->output(2)), {2, 1}, {2, 5});
  Evaluator e11(g.graph(), 11);
  e11.Set("x", x);
  ExpectValue(e11.Get(by_attr->output(0)), {2, 2}, {0, 1, 3, 4});
  ExpectValue(e11.Get(by_attr->output(1)), {2, 1}, {2, 5});
  Evaluator e18(g.graph(), 18);
  e18.Set("x", x);
  ExpectValue(e18.Get(uneven->output(0)), {2, 2}, {0, 1, 3, 4});
  ExpectValue(e18.Get(uneven->output(1)), {2, 1}, {2, 5});
  // Two equal parts of 3 do not exist without num_outputs.
  onnx::GraphProto odd = g.graph();
  odd.mutable_node(3)->mutable_attribute()->RemoveLast();
  Evaluator e_odd(odd, 18);
  e_odd.Set("x", x);
  EXPECT_THAT(ErrorOf(e_odd.Get(uneven->output(0))),
              HasSubstr("cannot split 3"));
}

TEST(OnnxEval, SlicesWithNegativeStartsAndSteps) {
  Graph g;
  const std::string reverse =
      g.Op("Slice", {"x", g.InitInts({-1}), g.InitInts({kInt64Min}),
                     g.InitInts({0}), g.InitInts({-2})});
  const std::string middle =
      g.Op("Slice", {"y", g.InitInts({1, -3}), g.InitInts({kInt64Max, -1}),
                     g.InitInts({0, 1})});
  const std::string empty =
      g.Op("Slice", {"x", g.InitInts({3}), g.InitInts({1})});
  Evaluator e(g.graph(), 13);
  e.Set("x", Iota({5}));
  e.Set("y", Iota({3, 4}));
  ExpectValue(e.Get(reverse), {3}, {4, 2, 0});
  ExpectValue(e.Get(middle), {2, 2}, {5, 6, 9, 10});
  ExpectValue(e.Get(empty), {0}, {});
}

TEST(OnnxEval, SqueezesAndUnsqueezesInBothOpsetForms) {
  Graph old_graph;
  onnx::NodeProto* u = old_graph.Node("Unsqueeze", {"x"});
  Ints(u, "axes", {0, -1});
  onnx::NodeProto* s = old_graph.Node("Squeeze", {u->output(0)});
  Ints(s, "axes", {0});
  Evaluator e11(old_graph.graph(), 11);
  e11.Set("x", Val({2}, {7, 8}));
  ExpectValue(e11.Get(u->output(0)), {1, 2, 1}, {7, 8});
  ExpectValue(e11.Get(s->output(0)), {2, 1}, {7, 8});

  Graph g;
  const std::string up = g.Op("Unsqueeze", {"x", g.InitInts({1})});
  const std::string all = g.Op("Squeeze", {"y"});
  const std::string one = g.Op("Squeeze", {"y", g.InitInts({-1})});
  const std::string wrong = g.Op("Squeeze", {"y", g.InitInts({1})});
  Evaluator e13(g.graph(), 13);
  e13.Set("x", Val({2}, {7, 8}));
  e13.Set("y", Val({1, 2, 1}, {7, 8}));
  ExpectValue(e13.Get(up), {2, 1}, {7, 8});
  ExpectValue(e13.Get(all), {2}, {7, 8});
  ExpectValue(e13.Get(one), {1, 2}, {7, 8});
  EXPECT_THAT(ErrorOf(e13.Get(wrong)),
              HasSubstr("cannot squeeze axis 1 of [1, 2, 1]"));
}

TEST(OnnxEval, FollowsTorchsShapeArithmetic) {
  // x.reshape(x.size(0), -1) as torch.onnx.export writes it.
  Graph g;
  const std::string shape = g.Op("Shape", {"x"});
  const std::string n = g.Op("Gather", {shape, g.InitInt(0)});
  const std::string n1 = g.Op("Unsqueeze", {n, g.InitInts({0})});
  onnx::NodeProto* cat = g.Node("Concat", {n1, g.InitInts({-1})});
  Int(cat, "axis", 0);
  const std::string out = g.Op("Reshape", {"x", cat->output(0)});
  Evaluator e(g.graph(), 13);
  const EvalValue x = Iota({2, 3, 4});
  e.Set("x", x);
  ExpectValue(e.Get(cat->output(0)), {2}, {2, -1});
  ExpectValue(e.Get(out), {2, 12}, x.data);
  absl::StatusOr<EvalValue> dims = e.Get(shape);
  ASSERT_TRUE(dims.ok());
  EXPECT_TRUE(dims->integer);
}

TEST(OnnxEval, CausalMaskGivesZerosAboveTheDiagonal) {
  Graph g;
  onnx::NodeProto* ones = g.Node("ConstantOfShape", {g.InitInts({3, 3})});
  onnx::AttributeProto* value = ones->add_attribute();
  value->set_name("value");
  value->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  value->mutable_t()->add_dims(1);
  value->mutable_t()->add_float_data(1);
  onnx::NodeProto* tril = g.Node("Trilu", {ones->output(0)});
  Int(tril, "upper", 0);
  const std::string masked =
      g.Op("Equal", {tril->output(0), g.InitFloats({}, {0})});
  const std::string scores =
      g.Op("Where", {masked, g.InitFloats({}, {-INFINITY}), "x"});
  const std::string p = g.Op("Softmax", {scores});
  Evaluator e(g.graph(), 13);
  e.Set("x", Val({1, 3, 3}, {5, 1, 2, 0, 0, 3, 0, 0, 0}));
  ExpectValue(e.Get(scores), {1, 3, 3},
              {5, -INFINITY, -INFINITY, 0, 0, -INFINITY, 0, 0, 0});
  ExpectValue(e.Get(p), {1, 3, 3},
              {1, 0, 0, 0.5, 0.5, 0, 1.0 / 3, 1.0 / 3, 1.0 / 3});
}

TEST(OnnxEval, LayerNormalizationMatchesItsDecomposition) {
  Graph g;
  const std::string scale = g.InitFloats({4}, {1, 2, 0.5, -1});
  const std::string bias = g.InitFloats({4}, {0, 0.25, -1, 3});
  onnx::NodeProto* ln = g.Node("LayerNormalization", {"x", scale, bias});
  Float(ln, "epsilon", 1e-3f);
  onnx::NodeProto* mean = g.Node("ReduceMean", {"x"});
  Ints(mean, "axes", {-1});
  const std::string d = g.Op("Sub", {"x", mean->output(0)});
  onnx::NodeProto* var =
      g.Node("ReduceMean", {g.Op("Pow", {d, g.InitFloats({}, {2})})});
  Ints(var, "axes", {-1});
  const std::string std_dev =
      g.Op("Sqrt", {g.Op("Add", {var->output(0), g.InitFloats({}, {1e-3f})})});
  const std::string y =
      g.Op("Add", {g.Op("Mul", {g.Op("Div", {d, std_dev}), scale}), bias});
  Evaluator e(g.graph(), 17);
  e.Set("x", Val({2, 4}, {1, 2, 3, 4, -1, 0.5, 7, 2}));
  absl::StatusOr<EvalValue> want = e.Get(y);
  ASSERT_TRUE(want.ok()) << want.status();
  ExpectValue(e.Get(ln->output(0)), {2, 4}, want->data);
  // Row 0: mean 2.5, variance 1.25.
  const double r = 1 / std::sqrt(1.25 + double{1e-3f});
  EXPECT_NEAR(want->data[0], -1.5 * r, 1e-12);
}

TEST(OnnxEval, ReducesWithAxesAsInputFromOpset18) {
  Graph g;
  onnx::NodeProto* mean = g.Node("ReduceMean", {"x", g.InitInts({0})});
  Int(mean, "keepdims", 0);
  const std::string sum = g.Op("ReduceSum", {"x"});
  Evaluator e(g.graph(), 18);
  e.Set("x", Iota({2, 3}));
  ExpectValue(e.Get(mean->output(0)), {3}, {1.5, 2.5, 3.5});
  ExpectValue(e.Get(sum), {1, 1}, {15});
}

TEST(OnnxEval, IntegerArithmeticCastRangeAndExpand) {
  Graph g;
  const std::string div = g.Op("Div", {"i", g.InitInt(2)});
  onnx::NodeProto* to_int = g.Node("Cast", {"f"});
  Int(to_int, "to", onnx::TensorProto::INT64);
  onnx::NodeProto* to_bool = g.Node("Cast", {"f"});
  Int(to_bool, "to", onnx::TensorProto::BOOL);
  const std::string range =
      g.Op("Range", {g.InitInt(1), g.InitInt(8), g.InitInt(3)});
  const std::string expand = g.Op("Expand", {"f", g.InitInts({2, 1})});
  const std::string most = g.Op("Max", {"f", g.InitFloats({}, {0}), "i"});
  Evaluator e(g.graph(), 13);
  e.Set("i", Val({2}, {-7, 7}, true));
  e.Set("f", Val({2}, {-2.5, 0}));
  ExpectValue(e.Get(div), {2}, {-3, 3});
  ExpectValue(e.Get(to_int->output(0)), {2}, {-2, 0});
  ExpectValue(e.Get(to_bool->output(0)), {2}, {1, 0});
  ExpectValue(e.Get(range), {3}, {1, 4, 7});
  ExpectValue(e.Get(expand), {2, 2}, {-2.5, 0, -2.5, 0});
  ExpectValue(e.Get(most), {2}, {0, 7});
  EXPECT_TRUE(e.Get(range)->integer);
  const std::string by_zero = g.Op("Div", {"i", "i"});
  Evaluator z(g.graph(), 13);
  z.Set("i", Val({2}, {1, 0}, true));
  EXPECT_THAT(ErrorOf(z.Get(by_zero)), HasSubstr("integer division by zero"));
}

TEST(OnnxEval, ConstantsAndIdentities) {
  Graph g;
  onnx::NodeProto* ints = g.Node("Constant", {});
  Ints(ints, "value_ints", {3, 4});
  onnx::NodeProto* f = g.Node("Constant", {});
  Float(f, "value_float", 0.5f);
  const std::string dropped = g.Op("Dropout", {g.Op("Identity", {"x"})});
  onnx::NodeProto* shape = g.Node("Shape", {"x"});
  Int(shape, "start", -1);
  Evaluator e(g.graph(), 15);
  e.Set("x", Iota({2, 5}));
  ExpectValue(e.Get(ints->output(0)), {2}, {3, 4});
  EXPECT_TRUE(e.Get(ints->output(0))->integer);
  ExpectValue(e.Get(f->output(0)), {}, {0.5});
  ExpectValue(e.Get(dropped), {2, 5}, Iota({2, 5}).data);
  ExpectValue(e.Get(shape->output(0)), {1}, {5});
}

TEST(OnnxEval, ASetIntermediateStopsEvaluation) {
  Graph g;
  const std::string a = g.Op("Relu", {"x"});
  const std::string b = g.Op("Neg", {a});
  Evaluator e(g.graph(), 13);
  e.Set(a, Val({1}, {4}));  // "x" is never bound
  ExpectValue(e.Get(b), {1}, {-4});
}

TEST(OnnxEval, RefusesAnUnsupportedOperatorNamingTheNode) {
  Graph g;
  const std::string y = g.Op("Relu", {g.Op("Hardmax", {"x"})});
  Evaluator e(g.graph(), 13);
  e.Set("x", Iota({2}));
  EXPECT_EQ(ErrorOf(e.Get(y)),
            "node /Hardmax_1 (Hardmax): the evaluator does not support this "
            "operator");
}

TEST(OnnxEval, RefusesAMissingInput) {
  Graph g;
  const std::string y = g.Op("Add", {"x", "nowhere"});
  Evaluator e(g.graph(), 13);
  e.Set("x", Iota({2}));
  EXPECT_EQ(ErrorOf(e.Get(y)),
            "node /Add_1 (Add): reads nowhere, which is neither bound, an "
            "initializer nor any node's output");
  EXPECT_THAT(ErrorOf(e.Get("x2")), HasSubstr("value x2: reads x2"));
}

TEST(OnnxEval, RefusesBadGraphsAndValuesWithoutCrashing) {
  Graph g;
  onnx::NodeProto* loop = g.Node("Relu", {"x"});
  loop->set_input(0, g.Op("Neg", {loop->output(0)}));
  onnx::NodeProto* dropout = g.Node("Dropout", {"x"}, 2);
  const std::string huge =
      g.Op("Expand", {"x", g.InitInts({1 << 20, 1 << 20, 2})});
  const std::string negative = g.Op("ConstantOfShape", {g.InitInts({-1})});
  const std::string slice =
      g.Op("Slice", {"x", g.InitInts({0}), g.InitInts({1}), g.InitInts({0}),
                     g.InitInts({0})});
  const std::string relu = g.Op("Relu", {"bad"});
  Evaluator e(g.graph(), 13);
  e.Set("x", Iota({2}));
  e.Set("bad", Val({3}, {1, 2}));
  EXPECT_THAT(ErrorOf(e.Get(loop->output(0))), HasSubstr("lies on a cycle"));
  EXPECT_THAT(ErrorOf(e.Get(dropout->output(1))),
              HasSubstr("does not compute its output Dropout3_1"));
  EXPECT_THAT(ErrorOf(e.Get(huge)), HasSubstr("more than 2^28 elements"));
  EXPECT_THAT(ErrorOf(e.Get(negative)), HasSubstr("negative dimension"));
  EXPECT_THAT(ErrorOf(e.Get(slice)), HasSubstr("a step of 0"));
  EXPECT_THAT(ErrorOf(e.Get(relu)),
              HasSubstr("holds 2 values where [3] makes 3"));
}

// --- a whole multi-head attention block ---

constexpr int64_t kBatch = 2, kLen = 3, kDim = 4, kHeads = 2;
constexpr int64_t kHeadDim = kDim / kHeads;

std::vector<float> Weights(int64_t n, double phase) {
  std::vector<float> w;
  for (int64_t i = 0; i < n; ++i) w.push_back(0.5 * std::sin(0.7 * i + phase));
  return w;
}

// y = x w + b for x [rows, in], w [in, out].
Values Affine(const Values& x, const std::vector<float>& w,
              const std::vector<float>& b, int64_t rows, int64_t in,
              int64_t out) {
  Values y(rows * out);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double s = b[o];
      for (int64_t i = 0; i < in; ++i) s += x[r * in + i] * w[i * out + o];
      y[r * out + o] = s;
    }
  }
  return y;
}

// Softmax(q k^T scale) v for each sample and head, heads concatenated.
Values Attend(const Values& qkv, double scale) {
  Values ctx(kBatch * kLen * kDim, 0);
  auto at = [&](int64_t n, int64_t t, int64_t part, int64_t h, int64_t j) {
    return qkv[(n * kLen + t) * 3 * kDim + part * kDim + h * kHeadDim + j];
  };
  for (int64_t n = 0; n < kBatch; ++n) {
    for (int64_t h = 0; h < kHeads; ++h) {
      for (int64_t t = 0; t < kLen; ++t) {
        Values p(kLen);
        double sum = 0;
        for (int64_t s = 0; s < kLen; ++s) {
          double dot = 0;
          for (int64_t j = 0; j < kHeadDim; ++j) {
            dot += at(n, t, 0, h, j) * at(n, s, 1, h, j);
          }
          p[s] = std::exp(dot * scale);
          sum += p[s];
        }
        for (int64_t s = 0; s < kLen; ++s) {
          for (int64_t j = 0; j < kHeadDim; ++j) {
            ctx[(n * kLen + t) * kDim + h * kHeadDim + j] +=
                p[s] / sum * at(n, s, 2, h, j);
          }
        }
      }
    }
  }
  return ctx;
}

// Q, K or V [N, L, D] as heads: [N, H, L, D/H], or [N, H, D/H, L] for K.
std::string Heads(Graph* g, const std::string& v, const Shape& perm) {
  const std::string split =
      g->Op("Reshape", {v, g->InitInts({0, 0, kHeads, kHeadDim})});
  onnx::NodeProto* t = g->Node("Transpose", {split});
  Ints(t, "perm", perm);
  return t->output(0);
}

TEST(OnnxEval, MultiHeadAttentionMatchesADirectComputation) {
  const std::vector<float> w_in = Weights(kDim * 3 * kDim, 0);
  const std::vector<float> b_in = Weights(3 * kDim, 1);
  const std::vector<float> w_out = Weights(kDim * kDim, 2);
  const std::vector<float> b_out = Weights(kDim, 3);
  Graph g;
  const std::string qkv =
      g.Op("Add", {g.Op("MatMul", {"x", g.InitFloats({kDim, 3 * kDim}, w_in)}),
                   g.InitFloats({3 * kDim}, b_in)});
  onnx::NodeProto* split = g.Node("Split", {qkv}, 3);
  Int(split, "axis", -1);
  const std::string q = Heads(&g, split->output(0), {0, 2, 1, 3});
  const std::string k = Heads(&g, split->output(1), {0, 2, 3, 1});
  const std::string v = Heads(&g, split->output(2), {0, 2, 1, 3});
  // 1/sqrt(D/H), rounded to float32 as an exported constant is.
  const float scale = 1 / std::sqrt(float{kHeadDim});
  const std::string scores =
      g.Op("Mul", {g.Op("MatMul", {q, k}), g.InitFloats({}, {scale})});
  const std::string ctx = g.Op("MatMul", {g.Op("Softmax", {scores}), v});
  onnx::NodeProto* back = g.Node("Transpose", {ctx});
  Ints(back, "perm", {0, 2, 1, 3});
  const std::string merged =
      g.Op("Reshape", {back->output(0), g.InitInts({0, 0, -1})});
  const std::string y =
      g.Op("Add", {g.Op("MatMul", {merged, g.InitFloats({kDim, kDim}, w_out)}),
                   g.InitFloats({kDim}, b_out)});

  EvalValue x;
  x.dims = {kBatch, kLen, kDim};
  for (int64_t i = 0; i < kBatch * kLen * kDim; ++i) {
    x.data.push_back(std::cos(1.3 * i));
  }
  const int64_t rows = kBatch * kLen;
  const Values want =
      Affine(Attend(Affine(x.data, w_in, b_in, rows, kDim, 3 * kDim), scale),
             w_out, b_out, rows, kDim, kDim);
  Evaluator e(g.graph(), 13);
  e.Set("x", x);
  ExpectValue(e.Get(y), {kBatch, kLen, kDim}, want, 1e-12);
}

}  // namespace
}  // namespace onnx_import_internal
}  // namespace cohort
