// Typed errors thrown by memscope.
//
// Every error derives from memscope::Error (itself a std::runtime_error), so callers can catch
// one type for "anything memscope refused". Messages name the input, the problem and the fix.
// Frees and destructors never throw; everything else may throw one of these.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

namespace memscope {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An allocation could not be satisfied even after releasing every cached block and retrying.
// The allocator that threw is unharmed and stays usable. The fields repeat the message's
// figures so programs can react without parsing text.
class OutOfMemoryError : public Error {
 public:
  struct Figures {
    std::size_t requested = 0;    // bytes asked for, before rounding
    std::size_t capacity = 0;     // the backend's total memory
    std::size_t device_free = 0;  // what the backend says is free right now
    std::size_t allocated = 0;    // bytes in live allocations of this allocator
    std::size_t reserved = 0;     // bytes held by this allocator from the backend
    std::size_t limit = 0;        // the allocator's memory limit (capacity if none set)
  };
  OutOfMemoryError(const std::string& message, const Figures& figures)
      : Error(message), figures_(figures) {}
  [[nodiscard]] const Figures& figures() const noexcept { return figures_; }

 private:
  Figures figures_;
};

// A configuration string (MEMSCOPE_ALLOC_CONF or one passed in code) holds an unknown key or a
// value outside what the key allows. key() and value() name the offending part.
class ConfigError : public Error {
 public:
  ConfigError(const std::string& message, std::string key, std::string value)
      : Error(message), key_(std::move(key)), value_(std::move(value)) {}
  [[nodiscard]] const std::string& key() const noexcept { return key_; }
  [[nodiscard]] const std::string& value() const noexcept { return value_; }

 private:
  std::string key_;
  std::string value_;
};

// A backend or probe cannot be used on this machine (no driver, no GPU, stub library...).
// The message says why and what would make it available.
class BackendUnavailableError : public Error {
 public:
  using Error::Error;
};

// The operating system or driver failed in a way that is not "out of memory".
class BackendError : public Error {
 public:
  using Error::Error;
};

// A pointer handed to the allocator is not a live allocation of it.
class InvalidPointerError : public Error {
 public:
  using Error::Error;
};

// A trace or snapshot file is malformed or uses constructs memscope refuses (e.g. pickle
// opcodes that import or call code).
class TraceFormatError : public Error {
 public:
  using Error::Error;
};

// A saved report or result file (JSON: a Report, a run recording, a replay) is malformed: the
// message names the file and the field ("series[2].t") and says what it must be.
class ReportFormatError : public Error {
 public:
  using Error::Error;
};

// A report could not be written (write_html: the folder is missing or not writable); the
// message names the file.
class ReportWriteError : public Error {
 public:
  using Error::Error;
};

// The allocator's own bookkeeping is inconsistent (a bug in memscope, or memory corrupted by
// the program): thrown by CachingAllocator::validate(). invariant() names the broken rule
// ("tiling", "free-bins", "pointer-map", "statistics"...); the message also names the block or
// segment.
class InternalError : public Error {
 public:
  InternalError(const std::string& message, std::string invariant)
      : Error(message), invariant_(std::move(invariant)) {}
  [[nodiscard]] const std::string& invariant() const noexcept { return invariant_; }

 private:
  std::string invariant_;
};

// The API was used out of order (e.g. stopping a stage that was never started).
class UsageError : public Error {
 public:
  using Error::Error;
};

}  // namespace memscope
