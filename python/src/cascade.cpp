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

#include <array>
#include <mutex>

#include "bindings.hpp"
#include "memscope/errors.hpp"
#include "sources.hpp"

namespace memscope::python {
namespace {

// The three callables as a CascadePeak counter. They are only touched with the GIL held.
class PyCounter {
 public:
  PyCounter(nb::object current, nb::object peak, nb::object reset_peak)
      : callables_{std::move(current), std::move(peak), std::move(reset_peak)} {}
  PyCounter(PyCounter&&) noexcept = default;
  PyCounter& operator=(PyCounter&&) = delete;
  PyCounter(const PyCounter&) = delete;
  PyCounter& operator=(const PyCounter&) = delete;
  ~PyCounter() {
    for (nb::object& f : callables_) drop_reference(f);
  }

  std::int64_t current() {
    nb::gil_scoped_acquire gil;  // held until the result is converted and released
    return nb::cast<std::int64_t>(callable(0)());
  }
  std::int64_t peak() {
    nb::gil_scoped_acquire gil;
    return nb::cast<std::int64_t>(callable(1)());
  }
  void reset_peak() {
    nb::gil_scoped_acquire gil;
    (void)callable(2)();
  }

  // For the garbage collector (see bind_cascade): the callables may refer back to the Python
  // object that owns this counter (a lambda's globals hold it), a cycle only it can break.
  std::array<nb::object, 3>& callables() noexcept { return callables_; }

 private:
  // The GIL must be held.
  const nb::object& callable(std::size_t which) const {
    const nb::object& f = callables_[which];
    if (!f.is_valid()) {
      throw UsageError(
          "memscope: this CascadeSource's callables were released by the garbage collector, "
          "with its Python object; keep the CascadeSource alive while a tracker uses it");
    }
    return f;
  }

  std::array<nb::object, 3> callables_;  // current, peak, reset_peak
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
  [[nodiscard]] std::array<nb::object, 3>& callables() noexcept {
    return state_->cascade.counter().callables();
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

struct PyCascadeSource : PySourceHandle {
  CascadeSource* cascade = nullptr;  // owned through `source`
};

// Garbage-collector support: the callables count as references of the Python object.
int cascade_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  auto* source = nb::inst_ptr<PyCascadeSource>(self);
  if (source->cascade == nullptr) return 0;
  for (const nb::object& f : source->cascade->callables()) Py_VISIT(f.ptr());
  return 0;
}

int cascade_clear(PyObject* self) {
  if (!nb::inst_ready(self)) return 0;
  auto* source = nb::inst_ptr<PyCascadeSource>(self);
  if (source->cascade != nullptr) {
    for (nb::object& f : source->cascade->callables()) f.reset();
  }
  return 0;
}

PyType_Slot cascade_slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(cascade_traverse)},
                               {Py_tp_clear, reinterpret_cast<void*>(cascade_clear)},
                               {0, nullptr}};

}  // namespace

void bind_cascade(nb::module_& m) {
  nb::class_<PyCascadeSource, PySourceHandle>(
      m, "CascadeSource", nb::type_slots(cascade_slots),
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
            auto source = std::make_shared<CascadeSource>(std::move(d), std::move(counter));
            CascadeSource* cascade = source.get();
            new (self) PyCascadeSource{{std::move(source)}, cascade};
          },
          nb::kw_only(), nb::arg("name"), nb::arg("kind"), nb::arg("mode"), nb::arg("current"),
          nb::arg("peak"), nb::arg("reset_peak"), nb::arg("available") = true,
          nb::arg("reason") = "");
}

}  // namespace memscope::python
