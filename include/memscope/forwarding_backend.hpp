// ForwardingBackend: a Backend that passes every call to another backend. Decorators that watch
// or count some of the calls (a replay noting the op at which reserved bytes peaked, a benchmark
// counting the CUDA driver calls a trace would make) derive from it and override only those,
// calling the base for the forwarding.
//
// Thread safety and errors: the inner backend's; the forwarding adds neither. Ownership: holds
// the inner backend (shared), which lives as long as the decorator.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "memscope/backend.hpp"

namespace memscope {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(std::shared_ptr<Backend> inner) : inner_(std::move(inner)) {}

  [[nodiscard]] std::string name() const override { return inner_->name(); }
  [[nodiscard]] MemoryKind memory_kind() const noexcept override { return inner_->memory_kind(); }
  [[nodiscard]] std::size_t capacity() const override { return inner_->capacity(); }
  [[nodiscard]] std::size_t free_bytes() const override { return inner_->free_bytes(); }
  [[nodiscard]] void* reserve(std::size_t bytes) override { return inner_->reserve(bytes); }
  void release(void* base, std::size_t bytes) noexcept override { inner_->release(base, bytes); }

  [[nodiscard]] std::size_t page_granularity() const noexcept override {
    return inner_->page_granularity();
  }
  [[nodiscard]] void* reserve_address_range(std::size_t bytes) override {
    return inner_->reserve_address_range(bytes);
  }
  void release_address_range(void* base, std::size_t bytes) noexcept override {
    inner_->release_address_range(base, bytes);
  }
  [[nodiscard]] bool map_pages(void* address, std::size_t bytes, std::size_t page) override {
    return inner_->map_pages(address, bytes, page);
  }
  void unmap_pages(void* address, std::size_t bytes, std::size_t page,
                   StreamId stream) noexcept override {
    inner_->unmap_pages(address, bytes, page, stream);
  }
  [[nodiscard]] bool move_pages(void* from, void* to, std::size_t bytes, std::size_t page,
                                StreamId stream) override {
    return inner_->move_pages(from, to, bytes, page, stream);
  }

  [[nodiscard]] EventId create_event() override { return inner_->create_event(); }
  void destroy_event(EventId event) noexcept override { inner_->destroy_event(event); }
  void record_event(EventId event, StreamId stream) override {
    inner_->record_event(event, stream);
  }
  [[nodiscard]] bool query_event(EventId event) override { return inner_->query_event(event); }
  void synchronize_event(EventId event) override { inner_->synchronize_event(event); }

 private:
  std::shared_ptr<Backend> inner_;
};

}  // namespace memscope
