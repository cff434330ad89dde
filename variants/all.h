// defines: make_all_variants — THE registry list. Adding a variant = one file in variants/ plus one
//          line here. No static-initialisation tricks: the order below is the ladder's order.
#pragma once
#include <memory>
#include <vector>

#include "variants/variant.h"

namespace gpt2 {

std::vector<std::unique_ptr<Variant>> make_all_variants();

}  // namespace gpt2
