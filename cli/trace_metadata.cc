#include "trace_metadata.h"

#include <string>

namespace metron::cli {

std::vector<traces::Arg> trace_metadata(const scenario::Scenario& s) {
  const models::ParallelSpec& p = s.parallel;
  return {{"tool", std::string("metron")},
          {"source", std::string("simulator")},
          {"model", s.model ? s.model->name : std::string("explicit costs")},
          {"hardware", s.hardware.name},
          {"schedule", s.schedule.name},
          {"tp", p.tp},
          {"pp", p.pp},
          {"dp", p.dp},
          {"vp", p.vp},
          {"cp", p.cp},
          {"ep", p.ep},
          {"microbatches", p.microbatches().value_or(0)}};
}

}  // namespace metron::cli
