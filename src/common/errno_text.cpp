#include "common/errno_text.hpp"

#include <cstring>

namespace memscope::detail {

std::string errno_text(int error) {
  char buf[128];
  // GNU strerror_r returns a pointer to the text (in buf or static storage) and never fails.
  return ::strerror_r(error, buf, sizeof buf);
}

}  // namespace memscope::detail
