// FastDivmod must equal integer division for every page size the engine accepts and every token
// index a row can have (< 2^31).
#include "kernels/decode/fast_divmod.h"

#include <gtest/gtest.h>

#include <random>

namespace pkv::decode {
namespace {

TEST(FastDivmodTest, MatchesIntegerDivision) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> big(0, 0x7fffffffu);
  for (uint32_t d = 1; d <= 300; ++d) {
    const FastDivmod f = FastDivmod::Make(d);
    for (uint32_t n = 0; n < 70000; ++n) ASSERT_EQ(f.Div(n), n / d) << n << " / " << d;
    for (int i = 0; i < 20000; ++i) {
      const uint32_t n = big(rng);
      uint32_t q, r;
      f.DivMod(n, &q, &r);
      ASSERT_EQ(q, n / d) << n << " / " << d;
      ASSERT_EQ(r, n % d);
    }
    ASSERT_EQ(f.Div(0x7fffffffu), 0x7fffffffu / d);
  }
}

}  // namespace
}  // namespace pkv::decode
