#include "common/prometheus_test_util.h"

#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace cohort {

std::vector<std::string> PrometheusFormatProblems(const std::string& text) {
  std::vector<std::string> problems;
  std::set<std::string> families, samples;
  std::string current;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty()) continue;
    if (absl::StartsWith(line, "# HELP ")) {
      const std::string name(line.substr(7, line.find(' ', 7) - 7));
      if (!families.insert(name).second) {
        problems.push_back(absl::StrCat("family twice: ", name));
      }
      current = name;
      continue;
    }
    if (absl::StartsWith(line, "# TYPE ")) {
      if (!absl::StartsWith(line.substr(7), current + " ")) {
        problems.push_back(absl::StrCat("TYPE without HELP: ", line));
      }
      continue;
    }
    const size_t end = line.find_first_of("{ ");
    const std::string name(line.substr(0, end));
    if (name != current) {
      problems.push_back(absl::StrCat("sample outside its family: ", line));
    }
    const std::string key(line.substr(0, line.rfind(' ')));
    if (!samples.insert(key).second) {
      problems.push_back(absl::StrCat("duplicate sample: ", line));
    }
  }
  return problems;
}

}  // namespace cohort
