// Writes the Prometheus text exposition format, version 0.0.4: the body a
// /metrics endpoint serves.
//
// A family (one metric name) is declared with its type and help text, then
// given samples, each with its own label values; Render() writes every
// family's HELP and TYPE lines followed by all its samples, in declaration
// order, so callers may add samples in whatever order their data comes
// (worker by worker) and the output still groups each family, as the format
// requires. Label values and help texts are escaped; values are written
// exactly (integers in full, doubles to round trip, NaN and +Inf/-Inf as
// the format spells them).
//
// Names are the caller's constants: a malformed or undeclared name, or a
// name declared twice, is a programmer error (CHECK).
//
// ServeMetrics puts such a text behind /metrics of a small HTTP server
// (common/http_server.h), rendered anew for every scrape.
//
// Ownership and thread safety: PrometheusText is a plain value type; not
// thread-safe (build one per scrape).
#ifndef COHORT_COMMON_PROMETHEUS_H_
#define COHORT_COMMON_PROMETHEUS_H_

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/http_server.h"

namespace cohort {

// The Content-Type of a 0.0.4 text exposition.
inline constexpr char kPrometheusContentType[] =
    "text/plain; version=0.0.4; charset=utf-8";

using PrometheusLabels = std::vector<std::pair<std::string, std::string>>;

class PrometheusText {
 public:
  enum class Type { kGauge, kCounter, kUntyped };

  // Declares family `name` (counters end in "_total", by convention and by
  // promtool's lint). Families without samples are left out of Render().
  void Declare(absl::string_view name, Type type, absl::string_view help);

  // A sample of the declared family `name`. A second sample with the same
  // label values is dropped (Prometheus rejects the whole scrape for it)
  // and false returned.
  bool Add(absl::string_view name, const PrometheusLabels& labels,
           double value);
  bool Add(absl::string_view name, double value) {
    return Add(name, {}, value);
  }

  // Declare and one unlabelled sample.
  void Gauge(absl::string_view name, absl::string_view help, double value);
  void Counter(absl::string_view name, absl::string_view help, double value);

  std::string Render() const;

 private:
  struct Family {
    std::string name;
    Type type;
    std::string help;
    std::vector<std::string> lines;  // rendered samples
    std::set<std::string> label_sets;
  };
  std::vector<Family> families_;
  std::map<std::string, size_t, std::less<>> index_;  // name -> families_
};

// Escapes for a label value (\\, \" and \n) and for a HELP text (\\, \n).
std::string PrometheusEscapeLabelValue(absl::string_view value);
std::string PrometheusEscapeHelp(absl::string_view help);
// A sample value: "42", "0.25", "NaN", "+Inf", "-Inf".
std::string PrometheusValue(double value);

// Serves `render()` at /metrics on `listen` (HOST:PORT, port 0: any), with
// Prometheus' content type. `what` names the flag in errors
// ("--metrics-listen"). Errors as HttpServer::Start's.
absl::StatusOr<std::unique_ptr<HttpServer>> ServeMetrics(
    const std::string& listen, const std::string& what,
    std::function<std::string()> render);

}  // namespace cohort

#endif  // COHORT_COMMON_PROMETHEUS_H_
