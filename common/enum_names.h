// defines: enum_name, enum_from_name — an enum's text through its nlohmann JSON mapping
//          (NLOHMANN_JSON_SERIALIZE_ENUM beside the enum), so each mapping is written once and JSON,
//          tables and YAML choices agree.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

namespace gpt2 {

template <class E>
std::string enum_name(E e) {
  return nlohmann::json(e).template get<std::string>();
}

}  // namespace gpt2
