// libFuzzer target: untrusted bytes as config.json -> ParseModelConfig (JSON parse + every
// field's range checks).
#include <cstddef>
#include <cstdint>
#include <string>

#include "worker/model/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)pkv::ParseModelConfig(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
