#include "presets_command.h"

#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <string>

#include "metron/models/model_presets.h"
#include "metron/models/parameter_count.h"

namespace metron::cli {
namespace {

struct PresetsOptions {
  std::string kind = "models";
  bool json = false;
};

/// A parameter count for a table: "125.2M", "174.6B", "1.01T".
std::string short_count(std::int64_t n) {
  const auto x = static_cast<double>(n);
  if (x >= 1e12) return fmt::format("{:.2f}T", x / 1e12);
  if (x >= 1e9) return fmt::format("{:.1f}B", x / 1e9);
  return fmt::format("{:.1f}M", x / 1e6);
}

void print_models(bool json) {
  if (json) {
    for (const auto& m : models::model_presets()) std::cout << models::to_json(m);
    return;
  }
  std::cout << fmt::format("{:<16}{:>9}{:>8}{:>8}{:>7}{:>5}{:>8}{:>8}{:>7}  {}\n", "name", "params",
                           "layers", "hidden", "heads", "kv", "ffn", "vocab", "seq", "mlp");
  for (const auto& m : models::model_presets()) {
    std::cout << fmt::format("{:<16}{:>9}{:>8}{:>8}{:>7}{:>5}{:>8}{:>8}{:>7}  {}{}\n", m.name,
                             short_count(models::parameter_count(m)), m.layers, m.hidden, m.heads,
                             m.num_kv_heads(), m.ffn_size(), m.vocab, m.seq_len,
                             models::to_string(m.mlp), m.moe ? " moe" : "");
  }
}

}  // namespace

void add_presets_command(CLI::App& app) {
  auto o = std::make_shared<PresetsOptions>();
  CLI::App* cmd = app.add_subcommand(
      "presets",
      "List the named presets with their key numbers. Models: the GPT-3 family, the models of\n"
      "Narayanan et al. SC'21 Table 1, Turing-NLG 530B, Llama-2 and Llama-3; parameter counts\n"
      "are computed from the shapes. Use a name wherever a model is asked for.");
  cmd->add_option("kind", o->kind, "what to list (hardware presets come with the cost models)")
      ->check(CLI::IsMember({"models"}));
  cmd->add_flag("--json", o->json, "one JSON model spec per line instead of a table");
  cmd->callback([o] { print_models(o->json); });
}

}  // namespace metron::cli
