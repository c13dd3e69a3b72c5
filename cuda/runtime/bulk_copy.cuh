#pragma once
// Bulk asynchronous copies between global and shared memory (the Hopper TMA unit, sm_90, PTX
// 8.0). A load completes on a transaction-counting mbarrier in shared memory and holds no
// registers while it is in flight; a store is issued from shared memory and tracked by bulk
// groups of the issuing thread. Addresses 16-byte aligned, sizes multiples of 16.
#include <cstdint>

namespace taco::gpu::detail {

__device__ __forceinline__ uint32_t shared_addr(const void* p) {
  return uint32_t(__cvta_generic_to_shared(p));
}

// An mbarrier whose phases complete with one arrival (plus the bytes announced to it).
__device__ __forceinline__ void mbar_init(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_addr(bar)) : "memory");
}

// Makes initialised barriers visible to the async proxy before the first copy uses them.
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// The arrival of a phase that announces `bytes` to come from bulk loads.
__device__ __forceinline__ void mbar_arrive_expect(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_addr(bar)),
               "r"(bytes)
               : "memory");
}

// Waits until the phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      " .reg .pred done;\n"
      "mbar_wait_%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra mbar_wait_%=;\n"
      "}" ::"r"(shared_addr(bar)),
      "r"(parity)
      : "memory");
}

// bytes from global src to shared dst, completing on bar.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes,
                                          uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(shared_addr(dst)),
      "l"(src), "r"(bytes), "r"(shared_addr(bar))
      : "memory");
}

// Orders this thread's (and, after a __syncwarp, the warp's) shared-memory writes before bulk
// stores that read them.
__device__ __forceinline__ void fence_shared_for_bulk() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// bytes from shared src to global dst, then closes the bulk group.
__device__ __forceinline__ void bulk_store(void* dst, const void* src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst),
               "r"(shared_addr(src)), "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// Waits until at most kPending of this thread's bulk groups still read their shared memory.
template <int kPending>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kPending) : "memory");
}

// Waits until every bulk store of this thread has completed.
__device__ __forceinline__ void bulk_wait_all() {
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

}  // namespace taco::gpu::detail
