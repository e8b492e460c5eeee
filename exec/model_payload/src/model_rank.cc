// Note [model rank] (model_rank.h).

#include "metron/exec/model_rank.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <variant>

#include "metron/base/error.h"
#include "metron/exec/adam.h"

namespace metron::exec {

namespace {

constexpr float kNoLoss = std::numeric_limits<float>::quiet_NaN();

std::string task_name(const ir::Task& task) {
  std::string name = std::string(ir::to_string(task.kind()));
  if (const auto* c = std::get_if<ir::Compute>(&task.op)) name = ir::to_string(c->phase);
  if (task.stage.valid()) name += " of stage " + std::to_string(task.stage.value());
  if (task.microbatch.valid()) name += ", microbatch " + std::to_string(task.microbatch.value());
  return name + " on rank " + std::to_string(task.rank.value());
}

/// One stage the rank holds, with its optimizer state. A stage is run by one task at a time
/// (its mutex), whichever stream the graph puts its tasks on.
struct HeldStage {
  HeldStage(const GptConfig& config, const StageSlice& slice) : stage(config, slice) {
    exp_avg.assign(stage.flat_parameters().size(), 0.0F);
    exp_avg_sq.assign(stage.flat_parameters().size(), 0.0F);
  }
  std::mutex mutex;
  GptStage stage;
  std::vector<float> exp_avg;
  std::vector<float> exp_avg_sq;
};

/// What a stage hands on: (stage, microbatch, what) → values (Note [model rank]).
using MailKey = std::tuple<std::int32_t, std::int32_t, ir::P2PKind>;

}  // namespace

struct ModelRank::Impl {
  const ir::Graph& graph;
  ir::RankId rank;
  std::int32_t replica = 0;
  std::int32_t replicas = 1;
  std::int64_t microbatches = 0;  // M: one replica's microbatches per step
  TrainingSetup setup;
  std::vector<StageSlice> slices;
  std::map<std::int32_t, std::int32_t> stage_rank;  // the replica's rank running each stage
  std::map<std::int32_t, std::unique_ptr<HeldStage>> stages;
  std::int32_t optimizer_tasks = 0;  // per step, on this rank
  ModelTransport transport;

  std::mutex mutex;  // everything below
  std::int64_t step = 0;
  std::int32_t optimizer_done = 0;
  std::set<std::tuple<std::int32_t, std::int32_t, ir::Phase>> ran;  // this step's pieces
  std::map<MailKey, std::vector<float>> outbox;
  std::map<MailKey, std::vector<float>> inbox;
  std::vector<std::vector<float>> losses;  // [step][global microbatch]

  /// `build`: false checks the rank's tasks without building its stages.
  Impl(const ir::Graph& g, ir::RankId r, std::int32_t pipeline_ranks, const TrainingSetup& s,
       std::vector<StageSlice> stage_slices, bool build)
      : graph(g), rank(r), setup(s), slices(std::move(stage_slices)) {
    validate(setup);
    if (pipeline_ranks < 1 || g.num_ranks() % pipeline_ranks != 0) {
      throw InvalidConfig("model payload: " + std::to_string(g.num_ranks()) +
                          " ranks are not replicas of " + std::to_string(pipeline_ranks) +
                          " pipeline ranks");
    }
    replica = r.value() / pipeline_ranks;
    replicas = g.num_ranks() / pipeline_ranks;
    microbatches = replica_microbatches(g);
    for (std::int32_t t = 0; t < g.num_tasks(); ++t) index(g.task(ir::TaskId{t}), pipeline_ranks);
    if (setup.microbatches != replicas * microbatches) {
      throw InvalidConfig("model payload: the setup trains " + std::to_string(setup.microbatches) +
                          " microbatches per step; the graph runs " + std::to_string(microbatches) +
                          " on each of " + std::to_string(replicas) + " replicas");
    }
    if (optimizer_tasks == 0) {
      throw InvalidConfig("model payload: rank " + std::to_string(r.value()) +
                          " has no optimizer step; expected a step graph that trains");
    }
    for (const auto& [stage, holder] : stage_rank) {
      if (holder != r.value() || !build) continue;
      stages.emplace(
          stage, std::make_unique<HeldStage>(setup.model, slices[static_cast<std::size_t>(stage)]));
    }
    losses.assign(static_cast<std::size_t>(setup.steps),
                  std::vector<float>(static_cast<std::size_t>(setup.microbatches), kNoLoss));
  }

  /// Checks one task of the graph and notes what the rank needs to know of it.
  void index(const ir::Task& task, std::int32_t pipeline_ranks) {
    const bool mine = task.rank == rank;
    const bool my_replica = task.rank.value() / pipeline_ranks == replica;
    if (const auto* c = std::get_if<ir::Compute>(&task.op)) {
      if (c->phase == ir::Phase::kOptimizer) {
        optimizer_tasks += mine ? 1 : 0;
        return;
      }
      if (!task.stage.valid()) return;
      if (mine && c->overlapped) {
        throw InvalidConfig("model payload: " + task_name(task) +
                            " is a DualPipe F&B unit; the model payload does not run those yet");
      }
      if (task.stage.value() >= std::ssize(slices)) {
        throw InvalidConfig("model payload: " + task_name(task) + " runs stage " +
                            std::to_string(task.stage.value()) + "; the model has " +
                            std::to_string(slices.size()) +
                            " stages (DualPipe's second direction is not run yet)");
      }
      if (my_replica) stage_rank[task.stage.value()] = task.rank.value();
      return;
    }
    if (!mine) return;
    if (std::holds_alternative<ir::Collective>(task.op)) {
      throw InvalidConfig(
          "model payload: " + task_name(task) + " (" + task.label +
          ") is a collective; the model payload runs pipelines without collectives so far "
          "(data parallelism and tensor parallelism are not built yet): expected dp 1 and tp 1");
    }
    const auto floats = setup.model.microbatch_size * setup.model.seq_len * setup.model.hidden;
    std::int64_t bytes = -1;
    if (const auto* s = std::get_if<ir::Send>(&task.op)) bytes = s->bytes;
    if (const auto* v = std::get_if<ir::Recv>(&task.op)) bytes = v->bytes;
    if (bytes >= 0 && bytes != floats * 4) {
      throw InvalidConfig("model payload: " + task_name(task) + " moves " + std::to_string(bytes) +
                          " bytes; the stage boundary holds " + std::to_string(floats) +
                          " fp32 values: expected a graph built for a model of dtype fp32");
    }
  }

  HeldStage& held(const ir::Task& task) {
    const auto found = stages.find(task.stage.value());
    if (found == stages.end()) {
      throw BackendError("model payload: " + task_name(task) + ": the rank holds no such stage");
    }
    return *found->second;
  }

  /// True the first time this step that a piece of (stage, microbatch, phase) runs.
  bool first_piece(const ir::Task& task, ir::Phase phase) {
    const std::lock_guard lock(mutex);
    return ran.emplace(task.stage.value(), task.microbatch.value(), phase).second;
  }

  std::vector<float> take(std::map<MailKey, std::vector<float>>& box, const MailKey& key,
                          const ir::Task& task) {
    const std::lock_guard lock(mutex);
    const auto found = box.find(key);
    if (found == box.end()) {
      throw BackendError("model payload: " + task_name(task) + ": nothing to take from stage " +
                         std::to_string(std::get<0>(key)) + " for microbatch " +
                         std::to_string(std::get<1>(key)) + " (" +
                         std::string(ir::to_string(std::get<2>(key))) + ")");
    }
    std::vector<float> values = std::move(found->second);
    box.erase(found);
    return values;
  }

  void put(std::map<MailKey, std::vector<float>>& box, const MailKey& key,
           std::vector<float> values) {
    const std::lock_guard lock(mutex);
    box[key] = std::move(values);
  }

  /// What stage `stage` receives from its neighbour `from` (Note [model rank]).
  std::vector<float> input_from(const ir::Task& task, std::int32_t from, ir::P2PKind what) {
    const std::int32_t stage = task.stage.value();
    const std::int32_t mb = task.microbatch.value();
    const auto holder = stage_rank.find(from);
    if (holder != stage_rank.end() && holder->second == rank.value()) {
      return take(outbox, {from, mb, what}, task);
    }
    return take(inbox, {stage, mb, what}, task);
  }

  std::int64_t global_microbatch(const ir::Task& task) const {
    return task.microbatch.value() * replicas + replica;
  }

  void compute(const ir::Task& task, const ir::Compute& c) {
    switch (c.phase) {
      case ir::Phase::kForward:
        if (first_piece(task, c.phase)) forward(task);
        return;
      case ir::Phase::kBackward:
      case ir::Phase::kBackwardInput:
        if (first_piece(task, c.phase)) backward(task, c.phase == ir::Phase::kBackward);
        return;
      case ir::Phase::kBackwardWeight:
        if (first_piece(task, c.phase)) {
          HeldStage& s = held(task);
          const std::lock_guard lock(s.mutex);
          s.stage.backward_weight(task.microbatch.value());
        }
        return;
      case ir::Phase::kOptimizer:
        optimizer_step();
        return;
      case ir::Phase::kRecompute:
      case ir::Phase::kOther:
        return;
    }
  }

  void forward(const ir::Task& task) {
    HeldStage& s = held(task);
    const StageSlice& slice = slices[static_cast<std::size_t>(task.stage.value())];
    std::int64_t current = 0;
    {
      const std::lock_guard lock(mutex);
      current = step;
    }
    if (current >= setup.steps) {
      throw BackendError("model payload: " + task_name(task) + ": step " +
                         std::to_string(current + 1) + " of a run set up for " +
                         std::to_string(setup.steps));
    }
    const std::int64_t global = global_microbatch(task);
    const MicrobatchData data = step_microbatch(setup, current, global);
    std::vector<float> activation;
    if (!slice.first) {
      activation = input_from(task, task.stage.value() - 1, ir::P2PKind::kActivation);
    }
    StageInput input{.tokens = data.tokens, .activation = activation, .labels = {}};
    if (slice.last) input.labels = data.labels;
    std::vector<float> out;
    {
      const std::lock_guard lock(s.mutex);
      out = s.stage.forward(task.microbatch.value(), input);
    }
    if (slice.last) {
      const std::lock_guard lock(mutex);
      losses[static_cast<std::size_t>(current)][static_cast<std::size_t>(global)] = out.at(0);
      return;
    }
    put(outbox, {task.stage.value(), task.microbatch.value(), ir::P2PKind::kActivation},
        std::move(out));
  }

  void backward(const ir::Task& task, bool with_weights) {
    HeldStage& s = held(task);
    const StageSlice& slice = slices[static_cast<std::size_t>(task.stage.value())];
    std::vector<float> grad;
    if (slice.last) {
      grad = {1.0F / static_cast<float>(microbatches)};
    } else {
      grad = input_from(task, task.stage.value() + 1, ir::P2PKind::kGradient);
    }
    std::vector<float> out;
    {
      const std::lock_guard lock(s.mutex);
      out = with_weights ? s.stage.backward(task.microbatch.value(), grad)
                         : s.stage.backward_input(task.microbatch.value(), grad);
    }
    if (slice.first) return;
    put(outbox, {task.stage.value(), task.microbatch.value(), ir::P2PKind::kGradient},
        std::move(out));
  }

  void optimizer_step() {
    std::int64_t current = 0;
    {
      const std::lock_guard lock(mutex);
      current = step;
      if (++optimizer_done < optimizer_tasks) return;  // the step's last optimizer task runs it
    }
    for (auto& [index, s] : stages) {
      const std::lock_guard lock(s->mutex);
      adam_step(s->stage.flat_parameters(), s->stage.flat_gradients(), s->exp_avg, s->exp_avg_sq,
                current + 1, setup.adam);
      s->stage.zero_gradients();
    }
    const std::lock_guard lock(mutex);
    optimizer_done = 0;
    ran.clear();
    ++step;
  }

  void send(const ir::Task& task, const ir::Send& s, std::int32_t tag) {
    const std::vector<float> values =
        take(outbox, {task.stage.value(), task.microbatch.value(), s.what}, task);
    transport.send(s.peer.value(), values, tag);
  }

  void recv(const ir::Task& task, const ir::Recv& r, std::int32_t tag) {
    std::vector<float> values(static_cast<std::size_t>(r.bytes / 4));
    transport.recv(r.peer.value(), values, tag);
    put(inbox, {task.stage.value(), task.microbatch.value(), r.what}, std::move(values));
  }
};

ModelRank::ModelRank(const ir::Graph& graph, ir::RankId rank, std::int32_t pipeline_ranks,
                     const TrainingSetup& setup, std::vector<StageSlice> slices)
    : impl_(std::make_unique<Impl>(graph, rank, pipeline_ranks, setup, std::move(slices), true)) {}

void check_model_payload(const ir::Graph& graph, std::int32_t pipeline_ranks,
                         const TrainingSetup& setup, const std::vector<StageSlice>& slices) {
  for (std::int32_t r = 0; r < graph.num_ranks(); ++r) {
    const ModelRank::Impl checked(graph, ir::RankId{r}, pipeline_ranks, setup, slices, false);
  }
}

ModelRank::~ModelRank() = default;

CpuWork ModelRank::work(ModelTransport transport) {
  impl_->transport = std::move(transport);
  Impl& impl = *impl_;
  return {
      .compute = [&impl](const Launch& launch,
                         const ir::Compute& c) { impl.compute(*launch.task, c); },
      .collective =
          [](const Launch& launch, const ir::Collective&) {
            throw BackendError("model payload: " + task_name(*launch.task) +
                               ": collectives are not run yet");
          },
      .send = [&impl](const Launch& launch,
                      const ir::Send& s) { impl.send(*launch.task, s, launch.tag); },
      .recv = [&impl](const Launch& launch,
                      const ir::Recv& r) { impl.recv(*launch.task, r, launch.tag); },
  };
}

RankRecord ModelRank::record() const {
  RankRecord out{.replica = impl_->replica};
  {
    const std::lock_guard lock(impl_->mutex);
    out.record.losses = impl_->losses;
  }
  std::vector<GptStage*> stages;
  for (auto& [index, s] : impl_->stages) stages.push_back(&s->stage);
  out.record.parameters = parameters_by_name(stages);
  return out;
}

std::int64_t replica_microbatches(const ir::Graph& graph) {
  std::int64_t out = 0;
  for (std::int32_t t = 0; t < graph.num_tasks(); ++t) {
    const ir::Task& task = graph.task(ir::TaskId{t});
    if (task.kind() == ir::TaskKind::kCompute && task.microbatch.valid()) {
      out = std::max<std::int64_t>(out, task.microbatch.value() + 1);
    }
  }
  return out;
}

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
