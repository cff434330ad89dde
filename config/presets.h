// defines: load_model_preset — a model preset (profiles/models/<name>.yaml) into ModelOptions.
#pragma once
#include <string>

#include "model/config.h"

namespace gpt2 {

// Reads `name_or_path`: a preset name (profile_dir/models/<name>.yaml, then the project's
// profiles/models/), or a YAML path relative to profile_dir. Errors name the file and the key.
ModelOptions load_model_preset(const std::string& name_or_path, const std::string& profile_dir);

}  // namespace gpt2
