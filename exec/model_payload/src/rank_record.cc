#include "metron/exec/rank_record.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "metron/base/error.h"

namespace metron::exec {

namespace {

bool is_stale(const RankRecord& r, const std::string& name, std::int64_t element) {
  const auto found = r.stale.find(name);
  return found != r.stale.end() &&
         std::binary_search(found->second.begin(), found->second.end(), element);
}

/// The current value of `name`'s `element` on a rank of another replica, or NaN.
float current_elsewhere(const std::vector<RankRecord>& ranks, std::int32_t replica,
                        const std::string& name, std::int64_t element) {
  for (const RankRecord& r : ranks) {
    if (r.replica == replica || is_stale(r, name, element)) continue;
    const auto found = r.record.parameters.find(name);
    if (found != r.record.parameters.end() && element < std::ssize(found->second)) {
      return found->second[static_cast<std::size_t>(element)];
    }
  }
  return std::numeric_limits<float>::quiet_NaN();
}

}  // namespace

TrainingRecord replica_record(const std::vector<RankRecord>& ranks, std::int32_t replica) {
  TrainingRecord out;
  for (const RankRecord& r : ranks) {
    if (out.losses.empty()) out.losses = r.record.losses;
    if (r.record.losses.size() != out.losses.size()) {
      throw InvalidConfig("training records: ranks recorded different numbers of steps");
    }
    for (std::size_t t = 0; t < out.losses.size(); ++t) {
      if (r.record.losses[t].size() != out.losses[t].size()) {
        throw InvalidConfig("training records: ranks recorded different numbers of microbatches");
      }
      for (std::size_t k = 0; k < out.losses[t].size(); ++k) {
        if (!std::isnan(r.record.losses[t][k])) out.losses[t][k] = r.record.losses[t][k];
      }
    }
    if (r.replica != replica) continue;
    for (const auto& [name, values] : r.record.parameters) {
      const auto [at, added] = out.parameters.emplace(name, values);
      if (!added) {
        throw InvalidConfig("training records: parameter " + name + " on two ranks of replica " +
                            std::to_string(replica));
      }
      const auto stale = r.stale.find(name);
      if (stale == r.stale.end()) continue;
      for (const std::int64_t e : stale->second) {
        if (e >= 0 && e < std::ssize(at->second)) {
          at->second[static_cast<std::size_t>(e)] = current_elsewhere(ranks, replica, name, e);
        }
      }
    }
  }
  return out;
}

namespace {

template <class T>
void put_pod(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);  // NOLINT: bytes of a POD
}

template <class T>
void put_values(std::string& out, const std::vector<T>& values) {
  put_pod<std::int64_t>(out, std::ssize(values));
  if (values.empty()) return;  // data() may be null, which append and memcpy must not get
  out.append(reinterpret_cast<const char*>(values.data()),  // NOLINT: bytes of PODs
             values.size() * sizeof(T));
}

void put_name(std::string& out, const std::string& name) {
  put_pod<std::int64_t>(out, std::ssize(name));
  out += name;
}

struct Reader {
  std::string_view bytes;
  template <class T>
  T pod() {
    T value{};
    need(sizeof value);
    std::memcpy(&value, bytes.data(), sizeof value);
    bytes.remove_prefix(sizeof value);
    return value;
  }
  std::int64_t count(std::int64_t element_bytes) {
    const auto n = pod<std::int64_t>();
    if (n < 0 || n > std::ssize(bytes) / element_bytes) fail();
    return n;
  }
  template <class T>
  std::vector<T> values() {
    std::vector<T> out(static_cast<std::size_t>(count(sizeof(T))));
    if (out.empty()) return out;  // data() may be null, which memcpy must not get
    std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
    bytes.remove_prefix(out.size() * sizeof(T));
    return out;
  }
  std::string name() {
    const std::int64_t length = count(1);
    std::string out(bytes.substr(0, static_cast<std::size_t>(length)));
    bytes.remove_prefix(static_cast<std::size_t>(length));
    return out;
  }
  void need(std::size_t n) const {
    if (bytes.size() < n) fail();
  }
  [[noreturn]] static void fail() {
    throw InvalidConfig("training record: the bytes are not a record encode_record wrote");
  }
};

}  // namespace

std::string encode_record(const RankRecord& record) {
  std::string out;
  put_pod<std::int32_t>(out, record.replica);
  put_pod<std::int64_t>(out, std::ssize(record.record.losses));
  for (const std::vector<float>& step : record.record.losses) put_values(out, step);
  put_pod<std::int64_t>(out, std::ssize(record.record.parameters));
  for (const auto& [name, values] : record.record.parameters) {
    put_name(out, name);
    put_values(out, values);
  }
  put_pod<std::int64_t>(out, std::ssize(record.stale));
  for (const auto& [name, elements] : record.stale) {
    put_name(out, name);
    put_values(out, elements);
  }
  return out;
}

RankRecord decode_record(std::string_view bytes) {
  Reader in{bytes};
  RankRecord out{.replica = in.pod<std::int32_t>()};
  const std::int64_t steps = in.count(sizeof(std::int64_t));
  for (std::int64_t t = 0; t < steps; ++t) out.record.losses.push_back(in.values<float>());
  const std::int64_t parameters = in.count(sizeof(std::int64_t));
  for (std::int64_t p = 0; p < parameters; ++p) {
    std::string name = in.name();
    out.record.parameters[std::move(name)] = in.values<float>();
  }
  const std::int64_t stale = in.count(sizeof(std::int64_t));
  for (std::int64_t p = 0; p < stale; ++p) {
    std::string name = in.name();
    out.stale[std::move(name)] = in.values<std::int64_t>();
  }
  if (!in.bytes.empty()) Reader::fail();
  return out;
}

}  // namespace metron::exec
