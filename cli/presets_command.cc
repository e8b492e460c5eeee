#include "presets_command.h"

#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "metron/models/hardware_presets.h"
#include "metron/models/model_presets.h"
#include "metron/models/parameter_count.h"
#include "number_format.h"

namespace metron::cli {
namespace {

struct PresetsOptions {
  std::string kind = "models";
  bool json = false;
};

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

void print_hardware(bool json) {
  if (json) {
    for (const auto& h : models::hardware_presets()) std::cout << models::to_json(h);
    return;
  }
  // Decimal units, as the datasheets state them; fabric bandwidths per GPU, one direction, as
  // NCCL reaches them on large messages: intra-node (NVLink) and inter-node (the NIC).
  std::cout << fmt::format("{:<12}{:>10}{:>14}{:>8}{:>10}{:>12}{:>12}\n", "name", "gpus/node",
                           "bf16 TFLOP/s", "HBM GB", "HBM TB/s", "intra GB/s", "inter GB/s");
  for (const auto& h : models::hardware_presets()) {
    const std::optional<double> bf16 = h.gpu.peak(models::Precision::kBf16);
    std::cout << fmt::format(
        "{:<12}{:>10}{:>14}{:>8.0f}{:>10.2f}{:>12.0f}{:>12.1f}\n", h.name, h.gpus_per_node,
        bf16 ? fmt::format("{:.1f}", *bf16 / 1e12) : std::string("-"),
        static_cast<double>(h.gpu.hbm_capacity) / 1e9, h.gpu.hbm_bandwidth / 1e12,
        h.intra_node.bandwidth / 1e9, h.inter_node.bandwidth / 1e9);
  }
}

}  // namespace

void add_presets_command(CLI::App& app) {
  auto o = std::make_shared<PresetsOptions>();
  CLI::App* cmd = app.add_subcommand(
      "presets",
      "List the named presets with their key numbers. Models: the GPT-3 family, the models of\n"
      "Narayanan et al. SC'21 Table 1, Turing-NLG 530B, Llama-2 and Llama-3; parameter counts\n"
      "are computed from the shapes. Hardware: DGX A100, DGX H100 and an H200 node, from NVIDIA\n"
      "datasheets (bandwidths per GPU, one direction), and cpu-local, this machine as metron's\n"
      "CPU backend sees it, measured by 'metron profile --sweep'. Use a name\n"
      "wherever a model or a machine is asked for.");
  cmd->add_option("kind", o->kind, "what to list: models (default) or hardware")
      ->check(CLI::IsMember({"models", "hardware"}));
  cmd->add_flag("--json", o->json, "one JSON spec per line instead of a table");
  cmd->callback([o] {
    if (o->kind == "hardware") {
      print_hardware(o->json);
    } else {
      print_models(o->json);
    }
  });
}

}  // namespace metron::cli
