// Text from outside the process (file names, CSV cells, names read from
// inside files) made safe to put into a one-line message: no byte of it can
// end the line, cut it short (a NUL through a C string), move the terminal's
// cursor, or be mistaken for the message's own quotes, so a file named
// "x\ncohort train: done" cannot forge a line of output.
//
// Plain functions; thread-safe.
#ifndef COHORT_COMMON_QUOTE_H_
#define COHORT_COMMON_QUOTE_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace cohort {

// `s` escaped C-style: \n, \r, \t, \\, \", \' and \xNN for every other
// control byte (C0, DEL, C1), for U+2028 and U+2029 (line separators to
// some readers) and for bytes that are not valid UTF-8. Other UTF-8 (a
// class folder named in Japanese) stays readable. Only the first
// `max_bytes` of `s` are shown, then "..." (a 1 GB CSV cell is not echoed).
std::string EscapeText(absl::string_view s, size_t max_bytes = 4096);

// A name for a message: as it is when EscapeText leaves it unchanged and it
// is not empty (so ordinary paths read as before), otherwise in double
// quotes, escaped.
std::string QuoteName(absl::string_view name);

}  // namespace cohort

#endif  // COHORT_COMMON_QUOTE_H_
