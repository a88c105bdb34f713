// memscope._memscope.CascadeSource: a Tracker source over any counter with a single resettable
// peak, given as three Python callables (torch.cuda's memory_allocated, max_memory_allocated and
// reset_peak_memory_stats, for one: memscope.torch.TorchCudaSource), made exact for nested and
// overlapping stages by the C++ cascade rule (memscope/cascade_peak.hpp), not a copy of it.
//
// The tracker uses it as a native source. The callables run under the source's lock with the
// GIL taken; nothing holds the GIL while waiting for that lock (the bindings release it first),
// so the lock order is always source lock, then GIL.
#include "memscope/cascade_peak.hpp"

#include <nanobind/stl/string.h>

#include <mutex>

#include "bindings.hpp"
#include "sources.hpp"

namespace memscope::python {
namespace {

// The three callables as a CascadePeak counter.
class PyCounter {
 public:
  PyCounter(nb::object current, nb::object peak, nb::object reset_peak)
      : current_(std::move(current)), peak_(std::move(peak)), reset_peak_(std::move(reset_peak)) {}
  PyCounter(PyCounter&&) noexcept = default;
  PyCounter& operator=(PyCounter&&) = delete;
  PyCounter(const PyCounter&) = delete;
  PyCounter& operator=(const PyCounter&) = delete;
  ~PyCounter() {
    drop_reference(current_);
    drop_reference(peak_);
    drop_reference(reset_peak_);
  }

  std::int64_t current() { return call(current_); }
  std::int64_t peak() { return call(peak_); }
  void reset_peak() {
    nb::gil_scoped_acquire gil;
    reset_peak_();
  }

 private:
  static std::int64_t call(const nb::object& f) {
    nb::gil_scoped_acquire gil;
    return nb::cast<std::int64_t>(f());
  }

  nb::object current_;
  nb::object peak_;
  nb::object reset_peak_;
};

using Cascade = CascadePeak<PyCounter>;

struct CascadeState {
  explicit CascadeState(PyCounter counter) : cascade(std::move(counter)) {}
  std::mutex mutex;
  Cascade cascade;
};

class CascadeWindow final : public MemorySource::Window {
 public:
  CascadeWindow(std::shared_ptr<CascadeState> state, std::unique_ptr<Cascade::Window> node,
                std::int64_t begin)
      : state_(std::move(state)), node_(std::move(node)), begin_(begin) {}
  CascadeWindow(const CascadeWindow&) = delete;
  CascadeWindow& operator=(const CascadeWindow&) = delete;
  ~CascadeWindow() override {
    if (node_->open) (void)close();
  }

  [[nodiscard]] std::int64_t begin() const noexcept override { return begin_; }

  MemorySource::Reading close() noexcept override {
    std::exception_ptr error;
    Cascade::Reading r;
    {
      const std::lock_guard lock(state_->mutex);
      r = state_->cascade.close(*node_, &error);
    }
    report_unraisable(error, "memscope: closing a tracker window of a CascadeSource");
    return {r.current, r.peak};
  }

 private:
  std::shared_ptr<CascadeState> state_;  // the windows stack outlives every window on it
  std::unique_ptr<Cascade::Window> node_;
  std::int64_t begin_;
};

class CascadeSource final : public MemorySource {
 public:
  struct Description {
    std::string name;
    SourceKind kind = SourceKind::gpu;
    std::string mode;
    bool available = true;
    std::string reason;
  };

  CascadeSource(Description description, PyCounter counter)
      : d_(std::move(description)), state_(std::make_shared<CascadeState>(std::move(counter))) {}

  [[nodiscard]] std::string name() const override { return d_.name; }
  [[nodiscard]] SourceKind kind() const noexcept override { return d_.kind; }
  [[nodiscard]] bool available() const noexcept override { return d_.available; }
  [[nodiscard]] std::string reason() const override { return d_.reason; }
  [[nodiscard]] std::string mode() const override { return d_.mode; }
  [[nodiscard]] std::int64_t current() const override {
    const std::lock_guard lock(state_->mutex);
    return state_->cascade.counter().current();
  }
  [[nodiscard]] std::unique_ptr<Window> open_window() override {
    auto node = std::make_unique<Cascade::Window>();
    std::int64_t begin = 0;
    {
      const std::lock_guard lock(state_->mutex);
      begin = state_->cascade.open(*node);
    }
    return std::make_unique<CascadeWindow>(state_, std::move(node), begin);
  }

 private:
  Description d_;
  std::shared_ptr<CascadeState> state_;
};

struct PyCascadeSource : PySourceHandle {};

}  // namespace

void bind_cascade(nb::module_& m) {
  nb::class_<PyCascadeSource, PySourceHandle>(
      m, "CascadeSource",
      "A Tracker source over a counter with one resettable peak (current(), peak(), "
      "reset_peak()), exact for nested and overlapping stages by the cascade rule: each window "
      "opening folds the peak so far into the innermost open window, then resets it. Exact as "
      "long as nothing else resets the counter's peak.")
      .def(
          "__init__",
          [](PyCascadeSource* self, std::string name, const std::string& kind, std::string mode,
             nb::object current, nb::object peak, nb::object reset_peak, bool available,
             std::string reason) {
            CascadeSource::Description d{std::move(name), parse_kind(kind), std::move(mode),
                                         available, std::move(reason)};
            PyCounter counter(std::move(current), std::move(peak), std::move(reset_peak));
            new (self) PyCascadeSource{
                {std::make_shared<CascadeSource>(std::move(d), std::move(counter))}};
          },
          nb::kw_only(), nb::arg("name"), nb::arg("kind"), nb::arg("mode"), nb::arg("current"),
          nb::arg("peak"), nb::arg("reset_peak"), nb::arg("available") = true,
          nb::arg("reason") = "");
}

}  // namespace memscope::python
