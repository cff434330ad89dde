// defines: Support, Variant — one optimization as an edit of the StepSpec description.
// A variant builds nothing and patches no live module: the TrainStep is built from the edited spec.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "bench/step_spec.h"

namespace gpt2 {

struct Support {
  bool ok = true;
  std::string why_not;  // e.g. "TF32 needs a CUDA device of sm80+"
};

// How a variant's losses must compare with the baseline's in the parity check.
enum class ParityClass {
  kExact,      // semantics-preserving: fp32 losses match tightly
  kPrecision,  // changes arithmetic precision: losses within a band
  kProblem,    // changes the problem (e.g. the batch): losses finite and falling
};

class Variant {
 public:
  virtual ~Variant() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view why() const = 0;            // one line, shown by list-variants
  virtual int published_rung() const { return -1; }    // seed 000's numbering, -1 if none
  virtual std::string_view source() const = 0;         // where it comes from, e.g. "seed 000 rung 2"
  virtual ParityClass parity() const { return ParityClass::kExact; }
  // Not a rung of the cumulative ladder: run on top of the full ladder instead (see expand_plan).
  virtual bool extra() const { return false; }
  virtual Support supports(const DeviceInfo&) const { return {}; }
  virtual std::vector<std::string_view> requires_() const { return {}; }
  virtual std::vector<std::string_view> conflicts() const { return {}; }
  virtual void apply(StepSpec&) const = 0;  // edit the description; build nothing
};

std::string to_string(ParityClass c);

}  // namespace gpt2
