// Edits the job spec a checkpoint file records and writes the result with
// fresh checksums, so that it verifies: what a reader must survive when the
// spec inside a checkpoint is not the one its tensors were trained under.
//
//   rewrite_checkpoint_spec IN.cohort OUT_DIR FROM TO
//
// replaces every FROM in the spec by TO and writes
// OUT_DIR/ckpt-<the same step>.cohort. Exit 2 when IN cannot be read, has no
// job spec or the spec has no FROM.
#include <cstdio>
#include <string>

#include "absl/strings/str_replace.h"
#include "common/checkpoint.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr,
                 "usage: rewrite_checkpoint_spec IN.cohort OUT_DIR FROM TO\n");
    return 2;
  }
  absl::StatusOr<cohort::Checkpoint> c = cohort::ReadCheckpointFile(argv[1]);
  if (!c.ok()) {
    std::fprintf(stderr, "%s\n", std::string(c.status().message()).c_str());
    return 2;
  }
  auto spec = c->metadata.find("job_spec");
  if (spec == c->metadata.end() ||
      spec->second.find(argv[3]) == std::string::npos) {
    std::fprintf(stderr, "%s: the job spec has no \"%s\"\n", argv[1], argv[3]);
    return 2;
  }
  spec->second = absl::StrReplaceAll(spec->second, {{argv[3], argv[4]}});
  cohort::CheckpointWriteOptions o;
  o.keep = 1 << 20;  // leave whatever else OUT_DIR holds
  const absl::Status s = cohort::WriteCheckpoint(argv[2], *c, o);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
