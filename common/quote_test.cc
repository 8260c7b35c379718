#include "common/quote.h"

#include <string>

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(Quote, PlainNamesStayAsTheyAre) {
  EXPECT_EQ(QuoteName("data/train/cat 1.jpg"), "data/train/cat 1.jpg");
  EXPECT_EQ(QuoteName("données/猫.png"), "données/猫.png");
}

TEST(Quote, LineBreaksNulsAndQuotesAreEscapedInQuotes) {
  EXPECT_EQ(QuoteName("a\ncohort train: done"), "\"a\\ncohort train: done\"");
  EXPECT_EQ(QuoteName(std::string("x\0y", 3)), "\"x\\x00y\"");
  EXPECT_EQ(QuoteName("say \"hi\"\r\t\\"), "\"say \\\"hi\\\"\\r\\t\\\\\"");
  EXPECT_EQ(QuoteName("\x1b[2J"), "\"\\x1b[2J\"");
  EXPECT_EQ(QuoteName(""), "\"\"");
}

TEST(Quote, InvalidUtf8AndLineSeparatorsAreHexEscaped) {
  EXPECT_EQ(EscapeText("\xff\xc3"), "\\xff\\xc3");
  EXPECT_EQ(EscapeText("\xc2\x85"), "\\xc2\\x85");  // NEL, a C1 control
  EXPECT_EQ(EscapeText("a\xe2\x80\xa8"
                       "b"),
            "a\\xe2\\x80\\xa8b");                   // U+2028
  EXPECT_EQ(EscapeText("\xc0\xaf"), "\\xc0\\xaf");  // overlong '/'
}

TEST(Quote, LongTextIsCut) {
  EXPECT_EQ(EscapeText(std::string(10, 'a'), 4), "aaaa...");
  EXPECT_EQ(EscapeText(std::string(100000, 'a')).size(), 4096u + 3);
}

}  // namespace
}  // namespace cohort
