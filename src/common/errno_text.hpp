// The text of an errno value for error messages.
#pragma once

#include <string>

namespace memscope::detail {

// strerror(error), thread-safe (strerror itself may share a buffer between threads).
[[nodiscard]] std::string errno_text(int error);

}  // namespace memscope::detail
