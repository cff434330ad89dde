#include "variants/all.h"

const gpt2::Variant gpt2::variants::sync_every_step{.name = "sync_every_step", .kind = VariantKind::kExtra,
    .why = "Anti-variant: read the loss on the host every step (.item()), measuring what one host sync costs",
    .source = "seed 001",
    .apply = [](StepSpec& s) { s.sync_every_step = true; },
    .anti = true};
