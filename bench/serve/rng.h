// A small deterministic random source for the serving benchmark: SplitMix64 (Steele, Lea and
// Flood 2014), keyed by (seed, stream, index) so every prompt, length and arrival gap is a pure
// function of --seed and its position, the same on every platform and standard library (the
// <random> distributions are implementation-defined). Not thread-safe; cheap to copy.
#pragma once

#include <cmath>
#include <cstdint>

namespace pkv::serve_bench {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  // A generator for one (seed, stream, index) triple: independent streams for lengths, tokens,
  // arrivals, documents, conversation turns.
  static Rng For(uint64_t seed, uint64_t stream, uint64_t index) {
    Rng r(seed ^ (stream * 0x9E3779B97F4A7C15ull));
    r.state_ ^= Rng(index + 0x632BE59BD9B4E019ull).NextU64();
    return r;
  }

  uint64_t NextU64() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  double NextDouble() { return static_cast<double>(NextU64() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, n). REQUIRES: n > 0. (Modulo bias < n / 2^64: negligible here.)
  uint64_t Below(uint64_t n) { return NextU64() % n; }
  // Standard normal by Box-Muller (one of the pair; the other is dropped for simplicity).
  double Normal() {
    const double u1 = 1.0 - NextDouble();  // (0, 1]: log() is finite
    const double u2 = NextDouble();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }
  // Exponential with the given rate (mean 1 / rate). REQUIRES: rate > 0.
  double Exponential(double rate) { return -std::log(1.0 - NextDouble()) / rate; }

 private:
  uint64_t state_;
};

}  // namespace pkv::serve_bench
