// Interned trace tags and the thread-local current one (trace_tag.hpp).
#include "memscope/trace_tag.hpp"

#include <pthread.h>

#include <functional>
#include <mutex>
#include <string>
#include <unordered_set>

namespace memscope {
namespace {

struct NameHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    return std::hash<std::string_view>{}(s);
  }
};

struct TagTable {
  std::mutex mutex;
  // Node-based: the strings never move, so their addresses are the tags.
  std::unordered_set<std::string, NameHash, std::equal_to<>> names;
};

TagTable& tag_table() {
  // Never destroyed: tags must stay valid while threads with static storage still record.
  // fork(): a child forked while another thread interns would find the mutex held forever, so
  // the forking thread holds it across fork(). The handlers are registered while the library
  // loads (below), before the tracker's, whose lock is taken first (stages intern under it):
  // pthread_atfork runs prepare handlers in reverse order of registration.
  static auto* const table = [] {
    auto* t = new TagTable;
    pthread_atfork([] { tag_table().mutex.lock(); }, [] { tag_table().mutex.unlock(); },
                   [] { tag_table().mutex.unlock(); });
    return t;
  }();
  return *table;
}

bool register_tag_fork_handlers() noexcept {
  try {
    (void)tag_table();
  } catch (...) {  // NOLINT(bugprone-empty-catch): out of memory while loading; first use retries
  }
  return true;
}

[[maybe_unused]] const bool kTagForkHandlersRegistered = register_tag_fork_handlers();

// The default TLS model, never initial-exec: this file is linked into the Python extension,
// which is dlopen'ed. One initial-exec variable flags the whole module STATIC_TLS, so its entire
// TLS block must fit in glibc's small static-TLS surplus, which every later-loaded library
// shares: then torch (libgomp) and memscope cannot be imported into one process
// (tests/python: test_static_tls.py). Read only for recorded events, where the __tls_get_addr
// call it costs in a shared object is small beside recording.
thread_local TraceTag current_tag = nullptr;

}  // namespace

TraceTag intern_trace_tag(std::string_view name) {
  if (name.empty()) return nullptr;
  TagTable& table = tag_table();
  const std::lock_guard lock(table.mutex);
  if (const auto it = table.names.find(name); it != table.names.end()) return &*it;
  return &*table.names.emplace(name).first;
}

TraceTag current_trace_tag() noexcept {
  return current_tag;
}

TraceTag exchange_trace_tag(TraceTag tag) noexcept {
  const TraceTag previous = current_tag;
  current_tag = tag;
  return previous;
}

}  // namespace memscope
