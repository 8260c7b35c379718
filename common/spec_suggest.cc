// Unknown field names in a job spec, answered with the field the user most
// likely meant: protobuf's parser names the message type and the field,
// and the message's descriptor knows the real names.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/nearest_name.h"
#include "common/spec_scope.h"
#include "google/protobuf/descriptor.h"

namespace cohort {
namespace spec_internal {
namespace {

// The two quoted words of `Message type "T" has no field named "F".`.
bool ParseUnknownField(const std::string& message, std::string* type,
                       std::string* field) {
  static constexpr char kType[] = "Message type \"";
  static constexpr char kField[] = "\" has no field named \"";
  if (!absl::StartsWith(message, kType)) return false;
  const size_t type_end = message.find(kField);
  if (type_end == std::string::npos) return false;
  const size_t field_start = type_end + (sizeof(kField) - 1);
  const size_t field_end = message.find('"', field_start);
  if (field_end == std::string::npos) return false;
  *type = message.substr((sizeof(kType) - 1), type_end - (sizeof(kType) - 1));
  *field = message.substr(field_start, field_end - field_start);
  return true;
}

}  // namespace

std::string WithFieldSuggestion(const std::string& message) {
  std::string type, field;
  if (!ParseUnknownField(message, &type, &field)) return message;
  const google::protobuf::Descriptor* d =
      google::protobuf::DescriptorPool::generated_pool()->FindMessageTypeByName(
          type);
  if (d == nullptr) return message;
  std::vector<std::string> names;
  for (int i = 0; i < d->field_count(); ++i) {
    names.push_back(d->field(i)->name());
  }
  const std::string nearest = NearestName(field, names);
  if (nearest.empty()) return message;
  std::string out = message;
  if (absl::EndsWith(out, ".")) out.pop_back();
  return absl::StrCat(out, "; did you mean \"", nearest, "\"?");
}

}  // namespace spec_internal
}  // namespace cohort
