// Replacing a file so that readers and crashes see the old content or the new, never a part:
// write a temporary file in the same folder, fsync it, rename it over the target, fsync the
// folder. rename() within one file system is atomic on POSIX.
//
// Thread safety: write_file_atomically() may be called from any thread (two writers of one path
// race as two renames do: one wins whole); a FolderLock is used by one thread. Ownership: a
// FolderLock owns its descriptor and releases the lock when destroyed.
#pragma once

#include <filesystem>
#include <functional>
#include <string_view>

namespace memscope {

// Only a regular file (or a missing one) is replaced: an existing one keeps its permission
// bits, and a symbolic link keeps pointing at the file, which is replaced. Anything else that
// exists (/dev/null, a FIFO, a terminal, /dev/stdout and other links into /dev and /proc) is
// written into, in place; a folder is refused.
// Throws BackendError (naming the file) when any step fails; the temporary file is removed
// and the target left as it was. `before_rename` runs after the temporary file is durable and
// before the rename: tests use it to crash or fail at the worst moment.
void write_file_atomically(const std::filesystem::path& path, std::string_view content,
                           const std::function<void()>& before_rename = {});

// Holds an exclusive flock on a folder for the life of the object, so read-modify-write of a
// file in it (the all_results.json merge) is not interleaved across processes.
class FolderLock {
 public:
  explicit FolderLock(const std::filesystem::path& folder);
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;
  ~FolderLock() noexcept;

 private:
  int fd_ = -1;
};

}  // namespace memscope
