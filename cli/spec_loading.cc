#include "spec_loading.h"

#include <filesystem>
#include <string_view>

#include "metron/base/diagnostics.h"
#include "metron/base/error.h"
#include "metron/base/file_io.h"
#include "metron/models/hardware_presets.h"
#include "metron/models/model_presets.h"

namespace metron::cli {
namespace {

bool names_a_file(const std::string& arg) {
  std::error_code ignored;
  return std::string_view(arg).ends_with(".json") || std::filesystem::is_regular_file(arg, ignored);
}

/// Reads a spec file with `read` and refuses its unknown keys, as a scenario does: a typo such as
/// "kv_head" must not be silently ignored. The message names the file, the key and the keys the
/// object may have.
template <class Read>
auto read_spec_file(const std::string& path, Read read) {
  Diagnostics diagnostics;
  auto spec = read(read_file(path), path, &diagnostics);
  if (diagnostics.count("unknown_key") > 0) {
    throw ParseError(path, 0, 0, diagnostics.messages().front());
  }
  return spec;
}

}  // namespace

models::ModelSpec load_model(const std::string& arg) {
  if (names_a_file(arg)) {
    return read_spec_file(arg, [](auto... a) { return models::model_from_json(a...); });
  }
  return models::model_preset(arg);
}

models::HardwareSpec load_hardware(const std::string& arg) {
  if (names_a_file(arg)) {
    return read_spec_file(arg, [](auto... a) { return models::hardware_from_file_json(a...); });
  }
  return models::hardware_preset(arg);
}

models::CostProfile load_profile(const std::string& path) {
  return read_spec_file(path, [](auto... a) { return models::cost_profile_from_json(a...); });
}

}  // namespace metron::cli
