#pragma once
// Models and machines named on the command line: a preset name, or the path of a JSON spec. One
// place for every subcommand that takes --model / --hardware / --profile.

#include <optional>
#include <string>

#include "metron/models/cost_profile.h"
#include "metron/models/hardware_spec.h"
#include "metron/models/model_spec.h"

namespace metron::cli {

/// `arg` as a preset name, or, when it names an existing file or ends in ".json", the model spec
/// in that file. Unknown names throw InvalidConfig listing the presets; an unknown key in the
/// file throws ParseError naming the file, the key, the valid keys and the nearest of them (as a
/// scenario does).
models::ModelSpec load_model(const std::string& arg);

/// As load_model, for machines; the file holds a spec or a measured document (`metron profile
/// --sweep`'s, models::hardware_from_file_json).
models::HardwareSpec load_hardware(const std::string& arg);

/// The cost profile in file `path` (Note [profile JSON]).
models::CostProfile load_profile(const std::string& path);

}  // namespace metron::cli
