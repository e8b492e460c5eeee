#pragma once
// Private: the published runs `metron validate` checks by default, compiled in from
// validation/cases/published_runs.json at configure time.

#include <string_view>

namespace metron::validation::detail {

/// The whole cases document (Note [published cases]).
std::string_view shipped_cases_json();

}  // namespace metron::validation::detail
