// MemorySource over a HostProbe (process RSS), and the placeholder for sources that cannot
// measure here.
#include <utility>

#include "memscope/errors.hpp"
#include "memscope/memory_source.hpp"

namespace memscope {
namespace {

class HostWindow final : public MemorySource::Window {
 public:
  explicit HostWindow(HostProbe::Window window) : window_(std::move(window)) {}
  [[nodiscard]] std::int64_t begin() const noexcept override { return window_.begin(); }
  MemorySource::Reading close() noexcept override {
    HostProbe::Window::Reading r = window_.close();
    return {r.current, r.peak};
  }

 private:
  HostProbe::Window window_;
};

class HostSource final : public MemorySource {
 public:
  explicit HostSource(std::shared_ptr<HostProbe> probe)
      : probe_(std::move(probe)), name_("host rss (pid " + std::to_string(probe_->pid()) + ")") {}

  [[nodiscard]] std::string name() const override { return name_; }
  [[nodiscard]] SourceKind kind() const noexcept override { return SourceKind::cpu; }
  [[nodiscard]] bool available() const noexcept override { return true; }
  [[nodiscard]] std::string reason() const override { return {}; }
  [[nodiscard]] std::string mode() const override { return probe_->mode_name(); }
  [[nodiscard]] std::int64_t current() const override { return probe_->current_rss(); }
  [[nodiscard]] std::int64_t peak_bound() const override { return probe_->peak_bound(); }
  [[nodiscard]] std::unique_ptr<Window> open_window() override {
    return std::make_unique<HostWindow>(probe_->open_window());
  }

 private:
  std::shared_ptr<HostProbe> probe_;
  std::string name_;
};

class UnavailableSource final : public MemorySource {
 public:
  UnavailableSource(SourceKind kind, std::string name, std::string reason)
      : kind_(kind), name_(std::move(name)), reason_(std::move(reason)) {}

  [[nodiscard]] std::string name() const override { return name_; }
  [[nodiscard]] SourceKind kind() const noexcept override { return kind_; }
  [[nodiscard]] bool available() const noexcept override { return false; }
  [[nodiscard]] std::string reason() const override { return reason_; }
  [[nodiscard]] std::string mode() const override { return "unavailable: " + reason_; }
  [[nodiscard]] std::int64_t current() const override { return 0; }
  [[nodiscard]] std::unique_ptr<Window> open_window() override {
    throw UsageError("memscope: source '" + name_ + "' is unavailable (" + reason_ +
                     "); it has no windows to open");
  }

 private:
  SourceKind kind_;
  std::string name_;
  std::string reason_;
};

}  // namespace

std::shared_ptr<MemorySource> make_host_source(const HostProbeOptions& options) {
  try {
    return make_host_source(std::make_shared<HostProbe>(options));
  } catch (const BackendUnavailableError& e) {
    // No /proc (another OS, a sandbox): the tracker still runs and says why cpu is missing.
    return make_unavailable_source(SourceKind::cpu, "host rss", e.what());
  }
}

std::shared_ptr<MemorySource> make_host_source(std::shared_ptr<HostProbe> probe) {
  if (probe == nullptr) throw UsageError("memscope: make_host_source() needs a probe, got null");
  return std::make_shared<HostSource>(std::move(probe));
}

std::shared_ptr<MemorySource> make_unavailable_source(SourceKind kind, std::string name,
                                                      std::string reason) {
  return std::make_shared<UnavailableSource>(kind, std::move(name), std::move(reason));
}

}  // namespace memscope
