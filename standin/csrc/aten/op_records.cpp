#include "aten/op_records.h"

#include <torch/csrc/DynamicTypes.h>

#include <array>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace standin {

namespace {

std::mutex ops_mutex;
std::unordered_map<const c10::FunctionSchema*, OpInfo> op_infos;
std::vector<std::string> executed;
// Never released: they would outlive the interpreter at exit.
py::object* rule_lookup = nullptr;
py::object* rule_record = nullptr;
py::object* dtype_rule = nullptr;
std::array<int8_t, static_cast<size_t>(at::ScalarType::NumOptions)> dtype_ruled{};  // 0 unasked, 1 no, 2 yes

const std::unordered_set<std::string> kCrossDeviceOps = {
    "aten::index", "aten::index_put", "aten::index_put_", "aten::_index_put_impl_", "aten::set_",
    "aten::lift_fresh", "aten::_copy_from", "aten::_copy_from_and_resize", "aten::copy_", "aten::_to_copy"};

// The matrix products (functional, and `out=`, which PyTorch's functional kernel calls on a backend like this one):
// a NeuronCore's matrix engine takes bfloat16 / float16 operands and accumulates in float32. PyTorch's CPU kernels
// round along the way and, without AVX-512 BF16, run 20-50x slower than float32's.
const std::unordered_set<std::string> kMatrixProducts = {
    "aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::addbmm", "aten::mv", "aten::addmv", "aten::dot"};

std::string full_name(const c10::OperatorHandle& op) {
  const c10::OperatorName& name = op.operator_name();
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

}  // namespace

void set_rule_callbacks(py::object lookup, py::object record, py::object dtypes) {
  rule_lookup = new py::object(std::move(lookup));
  rule_record = new py::object(std::move(record));
  dtype_rule = new py::object(std::move(dtypes));
}

const OpInfo& op_info(const c10::OperatorHandle& op) {
  const c10::FunctionSchema* schema = &op.schema();
  {
    std::lock_guard<std::mutex> lock(ops_mutex);
    auto found = op_infos.find(schema);
    if (found != op_infos.end()) return found->second;
  }
  OpInfo info;
  const auto& arguments = schema->arguments();
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (arguments[i].name() == "generator") info.generator_argument = static_cast<int>(i);
    info.writes.push_back(arguments[i].alias_info() != nullptr && arguments[i].alias_info()->isWrite());
  }
  info.crosses_devices = kCrossDeviceOps.count(schema->name()) > 0;
  info.draws_from_cpu_generator = schema->name() == "aten::native_dropout";
  info.accumulates_in_float = kMatrixProducts.count(schema->name()) > 0 &&
                              (schema->overload_name().empty() || schema->overload_name() == "out");
  if (rule_lookup) {
    py::gil_scoped_acquire gil;
    info.has_rule = (*rule_lookup)(full_name(op)).cast<bool>();
  }
  std::lock_guard<std::mutex> lock(ops_mutex);
  executed.push_back(schema->name());
  return op_infos.emplace(schema, info).first->second;
}

void record_rule_call(const c10::OperatorHandle& op) {
  py::gil_scoped_acquire gil;
  (*rule_record)(full_name(op));
}

void check_dtype(at::ScalarType dtype) {
  int8_t& ruled = dtype_ruled[static_cast<size_t>(dtype)];
  if (ruled == 1 || dtype_rule == nullptr) return;
  py::gil_scoped_acquire gil;
  // (a new reference: the call's argument tuple releases one)
  py::object python_dtype = py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(torch::getTHPDtype(dtype)));
  bool named = (*dtype_rule)(python_dtype).cast<bool>();
  ruled = named ? 2 : 1;
}

std::vector<std::string> executed_ops() {
  std::lock_guard<std::mutex> lock(ops_mutex);
  return executed;
}

void clear_executed_ops() {
  std::lock_guard<std::mutex> lock(ops_mutex);
  executed.clear();
  op_infos.clear();
  dtype_ruled.fill(0);
}

}  // namespace standin
