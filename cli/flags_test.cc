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
  const std::string usage = f.flags.Usage();
  EXPECT_NE(usage.find("--epochs=INT"), std::string::npos) << usage;
  EXPECT_NE(usage.find("--version"), std::string::npos) << usage;
}

TEST(Flags, UsageNamesTypesAndDefaults) {
  std::string file, dir = "/tmp/x";
  int64_t steps = 7;
  bool on = false;
  FlagSet flags("train");
  flags.String("out", &file, "where to write", "FILE");
  flags.String("dir", &dir, "where to read", "DIR");
  flags.String("job", &file, "the spec; required", "FILE");
  flags.Int("steps", &steps, "how many");
  flags.Int("epochs", &steps, "how many (default: the spec's)");
  flags.Bool("on", &on, "switch");
  const std::string usage = flags.Usage();
  for (const char* line :
       {"--out=FILE", "where to write (default: none)", "--dir=DIR",
        "where to read (default: /tmp/x)", "the spec; required\n",
        "--steps=INT", "how many (default: 7)",
        "how many (default: the spec's)\n", "switch (default: false)"}) {
    EXPECT_NE(usage.find(line), std::string::npos) << line << "\n" << usage;
  }
}

TEST(Flags, UnknownFlagNamesTheNearest) {
  Fixture f;
  const absl::Status s = f.flags.Parse({"--epoch=3"});
  EXPECT_NE(s.message().find("unknown flag --epoch for \"cohort train\": did "
                             "you mean --epochs?"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(f.flags.Parse({"--zzzzzz"}).message().find("did you mean"),
            std::string::npos);
}

}  // namespace
}  // namespace cohort
