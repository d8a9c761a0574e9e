// What is known of each op at its first call on the device, and what Python records: the ops that ran, and
// each call of an op or allocation of a dtype that a rule of neuron_rules.json names.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/utils/pybind.h>

#include <string>
#include <vector>

namespace standin {

struct OpInfo {
  int generator_argument = -1;
  std::vector<bool> writes;      // per argument: the op writes to it
  bool crosses_devices = false;  // takes tensors from another device by design (indices for indexing)
  bool has_rule = false;         // a rule names it: Python records each call
  bool draws_from_cpu_generator = false;  // random, but its CPU kernel takes no generator argument
  bool accumulates_in_float = false;  // a matrix product: bfloat16 / float16 operands accumulate in float32
};

// Python's callables: (op name) -> has a rule; (op name) -> records one eager call; (dtype) -> a rule names it.
void set_rule_callbacks(py::object lookup, py::object record, py::object dtypes);
const OpInfo& op_info(const c10::OperatorHandle& op);
void record_rule_call(const c10::OperatorHandle& op);
void check_dtype(at::ScalarType dtype);  // an allocation of `dtype`: recorded where a rule names it
std::vector<std::string> executed_ops();
void clear_executed_ops();

}  // namespace standin
