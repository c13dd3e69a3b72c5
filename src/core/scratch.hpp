#pragma once
// A reusable, uninitialized buffer for large per-tensor scratch (reconstructions): unlike
// std::vector::resize it does not zero-fill, which saves a pass over the memory. (Asking for
// transparent huge pages with madvise was measured slower here: the kernel's compaction cost
// more than the page faults it saved.)
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>

namespace taco {

template <typename T>
class ScratchBuffer {
 public:
  // Makes room for n elements; old contents are not kept. Returns data().
  T* reserve(size_t n) {
    if (n > cap_) {
      constexpr size_t kAlign = 64;
      const size_t bytes = (n * sizeof(T) + kAlign - 1) / kAlign * kAlign;
      mem_.reset();  // free first: peak memory is one buffer, not two
      cap_ = 0;
      void* p = std::aligned_alloc(kAlign, bytes);
      if (!p) throw std::bad_alloc();
      mem_.reset(static_cast<T*>(p));
      cap_ = bytes / sizeof(T);
    }
    return mem_.get();
  }
  T* data() { return mem_.get(); }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> mem_;
  size_t cap_ = 0;
};

}  // namespace taco
