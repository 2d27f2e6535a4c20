// Division by a run-time constant with a multiply and a shift (Granlund & Montgomery), for the
// token -> (page, slot) split in the decode kernels, where the page size is a run-time value
// (1..128) and an integer divide would cost ~20 instructions per loaded row.
//
// For a divisor d >= 1: shift = ceil(log2 d), mul = floor(2^32 * (2^shift - d) / d) + 1, and for
// every n < 2^31:  n / d == (umulhi(n, mul) + n) >> shift.  (The sum is taken in 64 bits.)
// Host and device; a plain value type, copied into kernel parameters.
#pragma once

#include <cstdint>

#include "kernels/common/host_device.h"

namespace pkv::decode {

struct FastDivmod {
  uint32_t divisor = 1;
  uint32_t mul = 1;
  uint32_t shift = 0;

  // REQUIRES: d >= 1.
  static FastDivmod Make(uint32_t d) {
    FastDivmod f;
    f.divisor = d;
    uint32_t s = 0;
    while ((uint64_t{1} << s) < d) ++s;
    f.shift = s;
    f.mul = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << s) - d)) / d + 1);
    return f;
  }

  PKV_HOST_DEVICE uint32_t Div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t hi = __umulhi(n, mul);
#else
    const uint32_t hi = static_cast<uint32_t>((static_cast<uint64_t>(n) * mul) >> 32);
#endif
    return static_cast<uint32_t>((static_cast<uint64_t>(hi) + n) >> shift);
  }

  // quotient and remainder of n / divisor.
  PKV_HOST_DEVICE void DivMod(uint32_t n, uint32_t* q, uint32_t* r) const {
    *q = Div(n);
    *r = n - *q * divisor;
  }
};

}  // namespace pkv::decode
