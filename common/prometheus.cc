#include "common/prometheus.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace cohort {
namespace {

// [a-zA-Z_:][a-zA-Z0-9_:]* for metric names; labels also exclude ':' and
// the reserved "__" prefix.
bool ValidName(absl::string_view name, bool label) {
  if (name.empty() || absl::ascii_isdigit(name[0])) return false;
  if (label && name.size() >= 2 && name[0] == '_' && name[1] == '_') {
    return false;
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_' && (label || c != ':')) {
      return false;
    }
  }
  return true;
}

const char* TypeName(PrometheusText::Type type) {
  switch (type) {
    case PrometheusText::Type::kGauge:
      return "gauge";
    case PrometheusText::Type::kCounter:
      return "counter";
    default:
      return "untyped";
  }
}

std::string Escape(absl::string_view s, bool quotes) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quotes) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string PrometheusEscapeLabelValue(absl::string_view value) {
  return Escape(value, true);
}

std::string PrometheusEscapeHelp(absl::string_view help) {
  return Escape(help, false);
}

std::string PrometheusValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Counters of bytes pass 1e9 quickly; the default 6 digits would round
  // them.
  if (value == std::trunc(value) && std::fabs(value) < 9.007e15) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.15g", value);
  if (std::strtod(buf, nullptr) != value) {
    std::snprintf(buf, sizeof(buf), "%.17g", value);
  }
  return buf;
}

void PrometheusText::Declare(absl::string_view name, Type type,
                             absl::string_view help) {
  CHECK(ValidName(name, false)) << "bad metric name \"" << name << "\"";
  CHECK(index_.find(name) == index_.end())
      << "metric " << name << " declared twice";
  index_.emplace(std::string(name), families_.size());
  families_.push_back(
      Family{std::string(name), type, std::string(help), {}, {}});
}

bool PrometheusText::Add(absl::string_view name, const PrometheusLabels& labels,
                         double value) {
  const auto it = index_.find(name);
  CHECK(it != index_.end()) << "metric " << name << " not declared";
  Family& f = families_[it->second];
  std::string label_text;
  for (const auto& [key, v] : labels) {
    CHECK(ValidName(key, true)) << "bad label name \"" << key << "\"";
    absl::StrAppend(&label_text, label_text.empty() ? "" : ",", key, "=\"",
                    PrometheusEscapeLabelValue(v), "\"");
  }
  if (!f.label_sets.insert(label_text).second) return false;
  f.lines.push_back(absl::StrCat(f.name, label_text.empty() ? "" : "{",
                                 label_text, label_text.empty() ? "" : "}", " ",
                                 PrometheusValue(value)));
  return true;
}

void PrometheusText::Gauge(absl::string_view name, absl::string_view help,
                           double value) {
  Declare(name, Type::kGauge, help);
  Add(name, value);
}

void PrometheusText::Counter(absl::string_view name, absl::string_view help,
                             double value) {
  Declare(name, Type::kCounter, help);
  Add(name, value);
}

std::string PrometheusText::Render() const {
  std::string out;
  for (const Family& f : families_) {
    if (f.lines.empty()) continue;
    absl::StrAppend(&out, "# HELP ", f.name, " ", PrometheusEscapeHelp(f.help),
                    "\n# TYPE ", f.name, " ", TypeName(f.type), "\n");
    for (const std::string& line : f.lines) absl::StrAppend(&out, line, "\n");
  }
  return out;
}

absl::StatusOr<std::unique_ptr<HttpServer>> ServeMetrics(
    const std::string& listen, const std::string& what,
    std::function<std::string()> render) {
  HttpServerOptions o;
  o.listen = listen;
  o.what = what;
  o.routes["/metrics"] = [render = std::move(render)](const HttpRequest&) {
    HttpResponse r;
    r.content_type = kPrometheusContentType;
    r.body = render();
    return r;
  };
  return HttpServer::Start(std::move(o));
}

}  // namespace cohort
