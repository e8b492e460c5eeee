#include "spec_loading.h"

#include <filesystem>
#include <string_view>

#include "metron/base/file_io.h"
#include "metron/models/hardware_presets.h"
#include "metron/models/model_presets.h"

namespace metron::cli {
namespace {

bool names_a_file(const std::string& arg) {
  std::error_code ignored;
  return std::string_view(arg).ends_with(".json") || std::filesystem::is_regular_file(arg, ignored);
}

}  // namespace

models::ModelSpec load_model(const std::string& arg) {
  if (names_a_file(arg)) return models::model_from_json(read_file(arg), arg);
  return models::model_preset(arg);
}

models::HardwareSpec load_hardware(const std::string& arg) {
  if (names_a_file(arg)) return models::hardware_from_json(read_file(arg), arg);
  return models::hardware_preset(arg);
}

models::CostProfile load_profile(const std::string& path) {
  return models::cost_profile_from_json(read_file(path), path);
}

}  // namespace metron::cli
