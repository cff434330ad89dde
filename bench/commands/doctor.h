// defines: run_doctor — `gpt2bench doctor`: what this build and the device support, and the device's facts.
#pragma once
#include <string>

namespace gpt2 {

int run_doctor(const std::string& device);

}  // namespace gpt2
