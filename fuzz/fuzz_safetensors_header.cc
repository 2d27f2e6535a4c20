// libFuzzer target: untrusted bytes as a whole .safetensors file -> ParseSafetensorsHeader, which
// must reject every malformed file with a status (never crash, overflow or read out of bounds).
#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"
#include "worker/model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)pkv::ParseSafetensorsHeader(absl::MakeConstSpan(data, size));
  return 0;
}
