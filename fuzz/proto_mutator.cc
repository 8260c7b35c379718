#include "fuzz/proto_mutator.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"

// libFuzzer's own mutation of a byte buffer.
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace cohort {
namespace fuzz {
namespace {

using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

using Rng = std::mt19937_64;

// A field of one message in the tree; `index` is an element of a repeated
// field or -1 (the singular field, or "append" for a repeated one).
struct Site {
  Message* message;
  const FieldDescriptor* field;
  int index;
};

// Every field of `m` and of the messages below it (present sub-messages
// only, so that the tree does not grow without bound).
void CollectSites(Message* m, std::vector<Site>* sites) {
  const Reflection* r = m->GetReflection();
  const google::protobuf::Descriptor* d = m->GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    sites->push_back({m, f, -1});
    if (f->is_repeated()) {
      for (int k = 0; k < r->FieldSize(*m, f); ++k) {
        sites->push_back({m, f, k});
        if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
          CollectSites(r->MutableRepeatedMessage(m, f, k), sites);
        }
      }
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE &&
               r->HasField(*m, f)) {
      CollectSites(r->MutableMessage(m, f), sites);
    }
  }
}

template <typename T>
T Pick(Rng& rng, const std::vector<T>& options) {
  return options[rng() % options.size()];
}

template <typename T>
T MutateInt(Rng& rng, T v) {
  using L = std::numeric_limits<T>;
  switch (rng() % 4) {
    case 0:
      return Pick<T>(rng, {T(0), T(1), T(-1), L::min(), L::max(),
                           T(L::max() - 1), T(L::min() + 1), T(L::max() / 2),
                           T(int64_t{1} << 31), T(int64_t{1} << 16)});
    case 1:
      return static_cast<T>(rng());
    case 2: {  // a small step, wrapping (unsigned: no overflow here)
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(static_cast<U>(v) +
                                           static_cast<U>(rng() % 17) - U(8)));
    }
    default:
      return static_cast<T>(rng() % 64);
  }
}

template <typename T>
T MutateFloat(Rng& rng, T v) {
  using L = std::numeric_limits<T>;
  switch (rng() % 3) {
    case 0:
      return Pick<T>(rng, {T(0), T(-0.0), T(1), T(-1), L::quiet_NaN(),
                           L::infinity(), -L::infinity(), L::max(), L::lowest(),
                           L::min(), L::denorm_min(), L::epsilon()});
    case 1:
      return -v;
    default:
      return v * T(2) + T(rng() % 3);
  }
}

std::string MutateString(Rng& rng, std::string s, size_t max_size) {
  if (rng() % 8 == 0) return "";
  if (s.empty()) return Pick<std::string>(rng, {"w0", "a", "\xff", "0:1"});
  const size_t size = s.size();
  const size_t limit = std::max(size, std::min(max_size, 2 * size + 64));
  s.resize(limit);
  s.resize(LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(s.data()), size, limit));
  return s;
}

int MutateEnum(Rng& rng, const EnumDescriptor* e) {
  if (rng() % 4 == 0) return static_cast<int>(rng() % 100) - 1;  // unknown
  return e->value(static_cast<int>(rng() % e->value_count()))->number();
}

// Sets a singular scalar field, or appends to / replaces an element of a
// repeated one (`index` -1 appends).
void MutateScalar(Rng& rng, const Site& s, size_t max_size) {
  Message* m = s.message;
  const Reflection* r = m->GetReflection();
  const FieldDescriptor* f = s.field;
  const bool rep = f->is_repeated();
  const bool add = rep && s.index < 0;
  const int k = s.index;
#define COHORT_MUTATE(Type, Get, Set, Add, GetRep, SetRep, mutate)             \
  {                                                                            \
    const Type old = add ? Type() : rep ? r->GetRep(*m, f, k) : r->Get(*m, f); \
    (void)old; /* not every mutation reads the old value */                    \
    const Type v = mutate;                                                     \
    if (add) {                                                                 \
      r->Add(m, f, v);                                                         \
    } else if (rep) {                                                          \
      r->SetRep(m, f, k, v);                                                   \
    } else {                                                                   \
      r->Set(m, f, v);                                                         \
    }                                                                          \
    return;                                                                    \
  }
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      COHORT_MUTATE(int32_t, GetInt32, SetInt32, AddInt32, GetRepeatedInt32,
                    SetRepeatedInt32, MutateInt(rng, old));
    case FieldDescriptor::CPPTYPE_INT64:
      COHORT_MUTATE(int64_t, GetInt64, SetInt64, AddInt64, GetRepeatedInt64,
                    SetRepeatedInt64, MutateInt(rng, old));
    case FieldDescriptor::CPPTYPE_UINT32:
      COHORT_MUTATE(uint32_t, GetUInt32, SetUInt32, AddUInt32,
                    GetRepeatedUInt32, SetRepeatedUInt32, MutateInt(rng, old));
    case FieldDescriptor::CPPTYPE_UINT64:
      COHORT_MUTATE(uint64_t, GetUInt64, SetUInt64, AddUInt64,
                    GetRepeatedUInt64, SetRepeatedUInt64, MutateInt(rng, old));
    case FieldDescriptor::CPPTYPE_DOUBLE:
      COHORT_MUTATE(double, GetDouble, SetDouble, AddDouble, GetRepeatedDouble,
                    SetRepeatedDouble, MutateFloat(rng, old));
    case FieldDescriptor::CPPTYPE_FLOAT:
      COHORT_MUTATE(float, GetFloat, SetFloat, AddFloat, GetRepeatedFloat,
                    SetRepeatedFloat, MutateFloat(rng, old));
    case FieldDescriptor::CPPTYPE_BOOL:
      COHORT_MUTATE(bool, GetBool, SetBool, AddBool, GetRepeatedBool,
                    SetRepeatedBool, !old);
    case FieldDescriptor::CPPTYPE_ENUM:
      COHORT_MUTATE(int, GetEnumValue, SetEnumValue, AddEnumValue,
                    GetRepeatedEnumValue, SetRepeatedEnumValue,
                    MutateEnum(rng, f->enum_type()));
    case FieldDescriptor::CPPTYPE_STRING:
      COHORT_MUTATE(std::string, GetString, SetString, AddString,
                    GetRepeatedString, SetRepeatedString,
                    MutateString(rng, old, max_size));
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return;  // handled by MutateMessageField
  }
#undef COHORT_MUTATE
}

// Sub-messages: clear one, add an empty or copied element, or remove one.
void MutateMessageField(Rng& rng, const Site& s) {
  Message* m = s.message;
  const Reflection* r = m->GetReflection();
  const FieldDescriptor* f = s.field;
  if (!f->is_repeated()) {
    if (r->HasField(*m, f) && rng() % 2 == 0) {
      r->ClearField(m, f);
    } else {
      r->MutableMessage(m, f);  // makes it present
    }
    return;
  }
  const int n = r->FieldSize(*m, f);
  if (s.index < 0 || n == 0) {
    r->AddMessage(m, f);
    return;
  }
  switch (rng() % 3) {
    case 0: {  // copy element index to the end
      std::unique_ptr<Message> copy(
          r->GetRepeatedMessage(*m, f, s.index).New());
      copy->CopyFrom(r->GetRepeatedMessage(*m, f, s.index));
      r->AddAllocatedMessage(m, f, copy.release());
      return;
    }
    case 1:  // remove element index
      r->SwapElements(m, f, s.index, n - 1);
      r->RemoveLast(m, f);
      return;
    default:  // move it one place
      if (n > 1) r->SwapElements(m, f, s.index, (s.index + 1) % n);
      return;
  }
}

}  // namespace

size_t MutateProtoInput(const Message& prototype, uint8_t* data, size_t size,
                        size_t max_size, unsigned seed) {
  Rng rng(seed);
  std::unique_ptr<Message> m(prototype.New());
  if (rng() % 4 == 0 || !m->ParseFromArray(data, static_cast<int>(size))) {
    return LLVMFuzzerMutate(data, size, max_size);
  }
  std::vector<Site> sites;
  CollectSites(m.get(), &sites);
  if (sites.empty()) return LLVMFuzzerMutate(data, size, max_size);
  const int changes = 1 + static_cast<int>(rng() % 2);
  for (int i = 0; i < changes; ++i) {
    const Site& s = sites[rng() % sites.size()];
    if (s.field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      MutateMessageField(rng, s);
      break;  // the sites below it may be gone
    }
    MutateScalar(rng, s, max_size);
    if (s.field->containing_oneof() != nullptr) break;  // as above
  }
  const std::string out = m->SerializeAsString();
  if (out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

}  // namespace fuzz
}  // namespace cohort
