#include "variants/all.h"

const gpt2::Variant gpt2::variants::vocab_padding{.name = "vocab_padding", .published_rung = 9, .parity = ParityClass::kPrecision,
    .why = "Round the vocabulary up to a multiple of 64 (50257 -> 50304) so the head's matmul tiles evenly",
    .source = "seed 000 rung 9; build-nanogpt",
    .apply = [](StepSpec& s) { s.model.vocab_pad_to = s.settings.vocab_multiple; }};
