#include "cli/layers_command.h"

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/nearest_name.h"
#include "google/protobuf/descriptor.pb.h"
#include "proto/job_descriptor.h"

namespace cohort {
namespace {

using google::protobuf::DescriptorProto;
using google::protobuf::FieldDescriptorProto;
using google::protobuf::FileDescriptorProto;

// FileDescriptorProto field numbers of the source-info paths used here.
constexpr int kMessageType = 4;  // FileDescriptorProto.message_type
constexpr int kField = 2;        // DescriptorProto.field

// job.proto with its comments, indexed by source path.
class Reference {
 public:
  bool Load() {
    google::protobuf::FileDescriptorSet set;
    if (!set.ParseFromArray(kJobDescriptor, kJobDescriptorSize) ||
        set.file_size() != 1) {
      return false;
    }
    file_ = set.file(0);
    for (const auto& l : file_.source_code_info().location()) {
      std::string text = l.leading_comments();
      if (text.empty()) text = l.trailing_comments();
      if (!text.empty()) comments_[absl::StrJoin(l.path(), ".")] = text;
    }
    return true;
  }

  // The top-level message named `name` and its index; null if none.
  const DescriptorProto* Message(const std::string& name, int* index) const {
    for (int i = 0; i < file_.message_type_size(); ++i) {
      if (file_.message_type(i).name() == name) {
        *index = i;
        return &file_.message_type(i);
      }
    }
    return nullptr;
  }

  // The comment on field `f` of top-level message `m`, on one line.
  std::string FieldComment(int m, int f) const {
    return OneLine(absl::StrCat(kMessageType, ".", m, ".", kField, ".", f));
  }

  // The comment above top-level message `m`, on one line.
  std::string MessageComment(int m) const {
    return OneLine(absl::StrCat(kMessageType, ".", m));
  }

  // The comment at source path `path`, its lines joined.
  std::string OneLine(const std::string& path) const {
    auto it = comments_.find(path);
    if (it == comments_.end()) return "";
    std::vector<std::string> lines;
    for (absl::string_view line : absl::StrSplit(it->second, '\n')) {
      line = absl::StripAsciiWhitespace(line);
      if (!line.empty()) lines.emplace_back(line);
    }
    return absl::StrJoin(lines, " ");
  }

  // "int32", "bool", "ConvSpec", "one of ADD, CONCAT", with "repeated ".
  std::string TypeOf(const FieldDescriptorProto& f) const {
    std::string type;
    const std::string name(absl::StripPrefix(f.type_name(), ".cohort."));
    switch (f.type()) {
      case FieldDescriptorProto::TYPE_MESSAGE:
        type = name;
        break;
      case FieldDescriptorProto::TYPE_ENUM:
        type = absl::StrCat("one of ", EnumValues(name));
        break;
      default:
        type = TypeName(f.type());
    }
    if (f.label() == FieldDescriptorProto::LABEL_REPEATED) {
      return absl::StrCat("repeated ", type);
    }
    return type;
  }

 private:
  std::string EnumValues(const std::string& name) const {
    std::vector<std::string> values;
    for (const auto& e : file_.enum_type()) {
      if (e.name() != name && !absl::EndsWith(name, "." + e.name())) continue;
      for (const auto& v : e.value()) values.push_back(v.name());
    }
    for (const auto& m : file_.message_type()) {
      for (const auto& e : m.enum_type()) {
        if (name != absl::StrCat(m.name(), ".", e.name())) continue;
        for (const auto& v : e.value()) values.push_back(v.name());
      }
    }
    return values.empty() ? name : absl::StrJoin(values, ", ");
  }

  static std::string TypeName(FieldDescriptorProto::Type t) {
    switch (t) {
      case FieldDescriptorProto::TYPE_BOOL:
        return "bool";
      case FieldDescriptorProto::TYPE_FLOAT:
        return "float";
      case FieldDescriptorProto::TYPE_DOUBLE:
        return "double";
      case FieldDescriptorProto::TYPE_STRING:
        return "string";
      case FieldDescriptorProto::TYPE_INT64:
      case FieldDescriptorProto::TYPE_UINT64:
        return "int64";
      default:
        return "int32";
    }
  }

  FileDescriptorProto file_;
  std::map<std::string, std::string> comments_;
};

// The layer kinds: LayerSpec's fields in its `kind` oneof.
struct Kind {
  std::string name;
  std::string type;  // the message type of its settings
  std::string comment;
};

std::vector<Kind> Kinds(const Reference& ref) {
  int index = 0;
  const DescriptorProto* layer = ref.Message("LayerSpec", &index);
  std::vector<Kind> kinds;
  if (layer == nullptr) return kinds;
  for (int f = 0; f < layer->field_size(); ++f) {
    const FieldDescriptorProto& field = layer->field(f);
    if (!field.has_oneof_index()) continue;
    kinds.push_back(
        {field.name(), ref.TypeOf(field), ref.FieldComment(index, f)});
  }
  return kinds;
}

void PrintKinds(const std::vector<Kind>& kinds) {
  std::printf(
      "Layer kinds (layers { KIND { FIELD: VALUE ... } }); "
      "cohort layers KIND shows one's fields:\n");
  for (const Kind& k : kinds) {
    std::printf("  %-20s %s\n", k.name.c_str(),
                k.type == "Empty" ? "(no fields)" : k.type.c_str());
  }
}

void PrintKind(const Reference& ref, const Kind& kind) {
  std::printf("%s\n", kind.name.c_str());
  if (!kind.comment.empty()) std::printf("  %s\n", kind.comment.c_str());
  int index = 0;
  const DescriptorProto* m = ref.Message(kind.type, &index);
  if (m != nullptr && !ref.MessageComment(index).empty()) {
    std::printf("  %s\n", ref.MessageComment(index).c_str());
  }
  if (m == nullptr || m->field_size() == 0) {
    std::printf("  no fields: layers { %s {} }\n", kind.name.c_str());
    return;
  }
  std::printf("  fields (%s; a field left out takes its default):\n",
              kind.type.c_str());
  for (int f = 0; f < m->field_size(); ++f) {
    const std::string comment = ref.FieldComment(index, f);
    std::printf("    %s: %s%s%s\n", m->field(f).name().c_str(),
                ref.TypeOf(m->field(f)).c_str(), comment.empty() ? "" : ". ",
                comment.c_str());
  }
}

}  // namespace

absl::Status RunLayers(const std::vector<std::string>& args, bool* help) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::printf(
        "cohort layers [KIND]: the layer kinds of a job spec's model, "
        "or one kind's fields\n");
    *help = true;
    return absl::OkStatus();
  }
  if (args.size() > 1) {
    return absl::InvalidArgumentError(
        "cohort layers takes at most one argument, a layer kind");
  }
  Reference ref;
  if (!ref.Load()) return absl::InternalError("job.proto's descriptor is bad");
  const std::vector<Kind> kinds = Kinds(ref);
  if (args.empty()) {
    PrintKinds(kinds);
    return absl::OkStatus();
  }
  std::vector<std::string> names;
  for (const Kind& k : kinds) {
    if (k.name == args[0]) {
      PrintKind(ref, k);
      return absl::OkStatus();
    }
    names.push_back(k.name);
  }
  const std::string nearest = NearestName(args[0], names);
  return absl::NotFoundError(absl::StrCat(
      "no layer kind \"", args[0], "\"",
      nearest.empty() ? "" : absl::StrCat("; did you mean ", nearest, "?"),
      " (cohort layers lists them)"));
}

}  // namespace cohort
