// defines: registry (the one explicit list of variants, in seed 000's ladder order), find_variant,
//          Recipe, ResolvedRung, resolve — recipe names -> StepSpec + skipped variants with reasons
#pragma once
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/step/step_spec.h"
#include "variants/all.h"
#include "variants/variant.h"

namespace gpt2 {

struct RecipeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// docs/variants.md's variant table, from the registry (`gpt2bench list-variants --markdown`): the
// baseline, then every variant with what it does, its source, parity class, and whether it runs on
// a CPU and on an sm80+ GPU, in one process or in two (ddp needs two).
std::string variants_markdown();

const Variant* find_variant(std::string_view name);  // nullptr if unknown

// Whether either of two known variants lists the other in its conflicts.
bool variants_conflict(std::string_view a, std::string_view b);
// `base` less what any of `added` conflicts with (or repeats), then `added`: extras put on top of a recipe
// (bf16_autocast replaces bf16_cast, gelu_epilogues fuse_bias_gelu).
std::vector<std::string> recipe_with(const std::vector<std::string>& base, const std::vector<std::string>& added);

struct Skipped {
  std::string variant, reason;
};

struct ResolvedRung {
  std::string name;                   // e.g. "03_fused_adamw"
  std::vector<std::string> variants;  // as asked for, in application order
  std::vector<std::string> applied;   // those that ran on this device
  std::vector<Skipped> skipped;       // unsupported on this device, with the reason
  ParityClass parity = ParityClass::kExact;  // the loosest class among `applied`
  bool anti = false;                         // an anti-variant among `applied` (Variant::anti)
  StepSpec spec;
};

// Applies `variants` (in registry order, whatever order they were named in) to `base`.
// Unknown names, duplicates, conflicts and missing requirements throw RecipeError naming the
// variants; a variant the device does not support is skipped, with its reason.
ResolvedRung resolve(const std::string& rung_name, const std::vector<std::string>& variants,
                     const StepSpec& base, const DeviceInfo& dev);

}  // namespace gpt2
