#include "metron/exec/rank_record.h"

#include <cmath>
#include <cstring>

#include "metron/base/error.h"

namespace metron::exec {

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
      if (!out.parameters.emplace(name, values).second) {
        throw InvalidConfig("training records: parameter " + name + " on two ranks of replica " +
                            std::to_string(replica));
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

void put_floats(std::string& out, const std::vector<float>& values) {
  put_pod<std::int64_t>(out, std::ssize(values));
  if (values.empty()) return;  // data() may be null, which append and memcpy must not get
  out.append(reinterpret_cast<const char*>(values.data()),  // NOLINT: bytes of floats
             values.size() * sizeof(float));
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
  std::vector<float> floats() {
    std::vector<float> values(static_cast<std::size_t>(count(sizeof(float))));
    if (values.empty()) return values;  // data() may be null, which memcpy must not get
    std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
    bytes.remove_prefix(values.size() * sizeof(float));
    return values;
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
  for (const std::vector<float>& step : record.record.losses) put_floats(out, step);
  put_pod<std::int64_t>(out, std::ssize(record.record.parameters));
  for (const auto& [name, values] : record.record.parameters) {
    put_pod<std::int64_t>(out, std::ssize(name));
    out += name;
    put_floats(out, values);
  }
  return out;
}

RankRecord decode_record(std::string_view bytes) {
  Reader in{bytes};
  RankRecord out{.replica = in.pod<std::int32_t>()};
  const std::int64_t steps = in.count(sizeof(std::int64_t));
  for (std::int64_t t = 0; t < steps; ++t) out.record.losses.push_back(in.floats());
  const std::int64_t parameters = in.count(sizeof(std::int64_t));
  for (std::int64_t p = 0; p < parameters; ++p) {
    const std::int64_t length = in.count(1);
    std::string name(in.bytes.substr(0, static_cast<std::size_t>(length)));
    in.bytes.remove_prefix(static_cast<std::size_t>(length));
    out.record.parameters[std::move(name)] = in.floats();
  }
  if (!in.bytes.empty()) Reader::fail();
  return out;
}

}  // namespace metron::exec
