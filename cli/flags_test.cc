#include "cli/flags.h"

#include "gtest/gtest.h"

namespace cohort {
namespace {

struct Fixture {
  std::string job;
  int64_t epochs = -1;
  bool quiet = false;
  FlagSet flags{"train"};
  Fixture() {
    flags.String("job", &job, "spec");
    flags.Int("epochs", &epochs, "epochs", 0, 100);
    flags.Bool("quiet", &quiet, "quiet");
  }
};

TEST(Flags, ParsesAllForms) {
  Fixture f;
  ASSERT_TRUE(
      f.flags.Parse({"--job=a.textproto", "--epochs", "3", "--quiet"}).ok());
  EXPECT_EQ(f.job, "a.textproto");
  EXPECT_EQ(f.epochs, 3);
  EXPECT_TRUE(f.quiet);
  ASSERT_TRUE(f.flags.Parse({"--noquiet"}).ok());
  EXPECT_FALSE(f.quiet);
}

TEST(Flags, ErrorsNameTheFlag) {
  struct Case {
    std::vector<std::string> args;
    const char* needle;
  } cases[] = {
      {{"--jbo=x"}, "unknown flag --jbo"},
      {{"--epochs=ten"},
       "--epochs must be an integer in [0, 100], got \"ten\""},
      {{"--epochs=-1"}, "--epochs must be an integer"},
      {{"--epochs=101"}, "--epochs must be an integer"},
      {{"--epochs"}, "--epochs needs a value"},
      {{"--job="}, "--job needs a value"},
      {{"stray"}, "unexpected argument \"stray\""},
      {{"--quiet=maybe"}, "--quiet must be true or false"},
  };
  for (const Case& c : cases) {
    Fixture f;
    absl::Status s = f.flags.Parse(c.args);
    ASSERT_FALSE(s.ok()) << c.needle;
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(c.needle), std::string::npos)
        << s.message() << " should contain " << c.needle;
  }
}

TEST(Flags, HelpIsRecognizedAndUsageListsFlags) {
  Fixture f;
  ASSERT_TRUE(f.flags.Parse({"--help"}).ok());
  EXPECT_TRUE(f.flags.help_requested());
  EXPECT_NE(f.flags.Usage().find("--epochs=N"), std::string::npos);
}

}  // namespace
}  // namespace cohort
