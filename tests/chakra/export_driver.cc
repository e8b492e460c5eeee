// Writes, for each step of chakra/scenarios.h, the graph's JSON form, its durations and its
// Chakra export into <out>/<step>/, for the independent Python reader (read_chakra.py).

#include <exception>
#include <filesystem>
#include <iostream>
#include <string>

#include "chakra/scenarios.h"
#include "metron/base/file_io.h"
#include "metron/chakra/chakra_export.h"
#include "metron/ir/json_format.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: chakra_export_driver <output directory>\n";
    return 2;
  }
  try {
    for (const metron::chakra::testing::NamedStep& s : metron::chakra::testing::chakra_steps()) {
      const std::string dir = (std::filesystem::path(argv[1]) / s.name).string();
      std::filesystem::remove_all(dir);
      metron::chakra::write_chakra_traces(s.step.graph, s.step.durations, dir);
      std::string durations = "[";
      for (std::size_t i = 0; i < s.step.durations.size(); ++i) {
        durations += (i == 0 ? "" : ",") + std::to_string(s.step.durations[i]);
      }
      metron::write_files_atomically({{dir + "/graph.json", metron::ir::to_json(s.step.graph)},
                                      {dir + "/durations.json", durations + "]\n"}});
      std::cout << dir << "\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "chakra_export_driver: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
