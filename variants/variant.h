// defines: Support, ParityClass, VariantKind, Variant — one optimization as a small declarative
//          descriptor: what it is, where it comes from, where it runs, and the edit it makes to the
//          StepSpec description. A variant builds nothing and patches no live module: the TrainStep
//          is built from the edited spec.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "bench/step/step_spec.h"

namespace gpt2 {

struct Support {
  bool ok = true;
  std::string why_not;  // e.g. "TF32 needs a CUDA device of sm80+"
};

// How a variant's losses must compare with the baseline's in the parity check.
enum class ParityClass {
  kExact,      // semantics-preserving: fp32 losses match tightly
  kPrecision,  // changes arithmetic precision: losses within a band
  kFp8,        // FP8 matmuls: a wider band of its own (bench/ladder/parity.h)
  kProblem,    // changes the problem (e.g. the batch): losses finite and falling
};

enum class VariantKind {
  kLadder,  // a rung of the cumulative ladder
  kExtra,   // not a rung of the ladder: run on top of the full ladder instead (see expand_plan)
};

inline Support runs_everywhere(const DeviceInfo&) { return {}; }
inline Support needs_bf16(const DeviceInfo& d) {
  if (!d.bf16) return {false, "bf16 needs a device with bf16 arithmetic (CUDA sm80+)"};
  return {};
}

inline Support needs_fp16(const DeviceInfo& d) {
  if (!d.fp16) return {false, "no fast fp16 matmul on this CPU (no AVX512-FP16 or AMX-FP16)"};
  return {};
}

struct Variant {
  std::string_view name;
  int published_rung = -1;  // seed 000's numbering, -1 if none
  ParityClass parity = ParityClass::kExact;
  VariantKind kind = VariantKind::kLadder;
  std::string_view why;     // one line, shown by list-variants
  std::string_view source;  // where it comes from, e.g. "seed 000 rung 2"
  std::vector<std::string_view> requires_ = {};
  std::vector<std::string_view> conflicts = {};
  Support (*supports)(const DeviceInfo&) = runs_everywhere;
  void (*apply)(StepSpec&) = nullptr;  // edit the description; build nothing
  // An anti-variant: it slows the step on purpose, to measure what that costs. Its rungs are never taken for a
  // run's fastest (the C++ rung a reference is compared with, the report's cost per token).
  bool anti = false;
  // What it does to the plan, read by the plan and the parity rule in place of its name: it searches the batch (the
  // rungs from it on run at another batch than the profile's), or it runs the step on several processes.
  bool searches_batch = false;
  bool data_parallel = false;

  bool extra() const { return kind == VariantKind::kExtra; }
  // An extra a kept rung may take (RungKind::kKept): exact (a fusion: not a changed precision or problem) and not
  // slowed on purpose.
  bool keepable() const { return extra() && parity == ParityClass::kExact && !anti; }
};

std::string to_string(ParityClass c);
ParityClass parity_class_from(const std::string& name);  // throws std::invalid_argument on an unknown name

}  // namespace gpt2
