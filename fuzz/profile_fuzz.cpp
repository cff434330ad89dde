// Any bytes as a profile: the parser either returns a Profile or throws ConfigError/DataError
// naming the file; it never crashes, hangs or throws anything else.
#include "config/profile.h"
#include "config/yaml_reader.h"
#include "fuzz_util.h"
#include "variants/registry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = gpt2::fuzz::scratch_file(data, size, ".yaml");
  try {
    const gpt2::Profile p = gpt2::load_profile(path);
    (void)gpt2::expand_plan(p);
  } catch (const gpt2::ConfigError& e) {
    if (std::string(e.what()).find("gpt2bench-fuzz-") == std::string::npos &&
        std::string(e.what()).find("model preset") == std::string::npos)
      __builtin_trap();  // an error that does not name the file
  } catch (const gpt2::DataError&) {
  }
  return 0;
}
