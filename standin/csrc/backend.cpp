// The backend as one translation unit: every build compiles all of it (the build key covers every source), and
// PyTorch's headers, which are most of the compile time, are parsed once instead of once per file (23 s against
// 50 s on two cores). standin/native.py compiles this file only.
#include "aten/fallback.cpp"
#include "aten/host_view.cpp"
#include "aten/kernels.cpp"
#include "aten/op_records.cpp"
#include "bindings.cpp"
#include "runtime/allocator.cpp"
#include "runtime/device.cpp"
#include "runtime/generator.cpp"
#include "runtime/guard.cpp"
#include "runtime/hooks.cpp"
