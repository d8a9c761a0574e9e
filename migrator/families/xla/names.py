"""Qualified names of the torch_xla APIs the XLA rules match (data only: no rule imports it back)."""

XM = "torch_xla.core.xla_model"
XR = "torch_xla.runtime"
PL = "torch_xla.distributed.parallel_loader"
XMP = "torch_xla.distributed.xla_multiprocessing"
METRICS = "torch_xla.debug.metrics"

LOCAL_RANK = 'int(os.environ.get("LOCAL_RANK", 0))'
# The XLA device as a string given to a tensor call or `torch.device`: "xla:0" is the device `xm.xla_device()`
# returns (the runtime gives each process one device), so it means what "xla" means.
XLA_DEVICE_STRINGS = frozenset({"xla", "xla:0"})
# Waits for the work queued on the device (TorchNeuron runs asynchronously; torch.accelerator is "neuron" there).
SYNCHRONIZE = "torch.accelerator.synchronize"
# Clock reads: a graph cut or device wait between two of them (or in a loop that reads one) is being timed.
CLOCKS = frozenset(
    {
        *(f"time.{name}" for name in ("time", "perf_counter", "monotonic", "process_time", "thread_time")),
        *(f"time.{name}_ns" for name in ("time", "perf_counter", "monotonic", "process_time", "thread_time")),
        "timeit.default_timer",
    }
)
RANK = 'int(os.environ.get("RANK", 0))'
WORLD_SIZE = 'int(os.environ.get("WORLD_SIZE", 1))'

# Calls replaced by an expression: qualified name -> (template, imports it needs).
CALL_RENAMES: dict[str, tuple[str, tuple[str, ...]]] = {
    f"{XM}.xrt_world_size": (WORLD_SIZE, ("os",)),
    f"{XR}.world_size": (WORLD_SIZE, ("os",)),
    f"{XM}.get_ordinal": (RANK, ("os",)),
    f"{XR}.global_ordinal": (RANK, ("os",)),
    f"{XM}.get_local_ordinal": (LOCAL_RANK, ("os",)),
    f"{XR}.local_ordinal": (LOCAL_RANK, ("os",)),
    f"{XM}.wait_device_ops": (f"{SYNCHRONIZE}()", ("torch",)),
}
DEVICE_CALLS = frozenset({f"{XM}.xla_device", "torch_xla.device"})
SYNC_CALLS = frozenset({f"{XM}.mark_step", "torch_xla.sync"})
# Statement calls whose rewrite into statements also fits a one-line `if`/`for`/`while`/`with` body holding only
# that call: the body becomes an indented block (`if not master: xm.rendezvous("download")`, torch-neuronx's
# MNIST sample).
SUITE_CALLS = frozenset({f"{XM}.rendezvous"})
METRICS_CALLS = frozenset({f"{METRICS}.metrics_report", f"{METRICS}.short_metrics_report"})
DEVICE_LOADERS = frozenset({f"{PL}.MpDeviceLoader"})
PARALLEL_LOADER = f"{PL}.ParallelLoader"
AUTOCASTS = frozenset({"torch.autocast", "torch.amp.autocast"})
XLA_AUTOCAST = "torch_xla.amp.autocast"
PROCESS_GROUP_INIT = "torch.distributed.init_process_group"
XLA_CHECKPOINT = "torch_xla.utils.checkpoint.checkpoint"
IS_MASTER = f"{XM}.is_master_ordinal"
SET_RNG_STATE = f"{XM}.set_rng_state"
OPTIMIZER_STEP = f"{XM}.optimizer_step"
REDUCE_GRADIENTS = f"{XM}.reduce_gradients"
# Calls that all-reduced the gradients across processes: once rewritten, DistributedDataParallel does it.
GRADIENT_SYNC_CALLS = frozenset({OPTIMIZER_STEP, REDUCE_GRADIENTS})
SPAWN = f"{XMP}.spawn"
LAUNCH = "torch_xla.launch"  # xmp.spawn over every device (or fn(LOCAL_RANK) when torchrun started it)
SPAWNS = frozenset({SPAWN, LAUNCH})

# Marks a script that runs several processes; its device gets the LOCAL_RANK index.
DISTRIBUTED_NAMES = frozenset(
    {
        "init_process_group",
        "xrt_world_size",
        "world_size",
        "get_ordinal",
        "global_ordinal",
        "get_local_ordinal",
        "local_ordinal",
        "DistributedDataParallel",
        "xla_multiprocessing",
        "xmp",
        "DistributedSampler",
        "neuronx_distributed",  # tensor / pipeline parallel: always several processes
    }
)
# Variables torchrun sets: a script that reads one runs as several processes.
TORCHRUN_VARIABLES = frozenset({"LOCAL_RANK", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"})

# --- Ahead-of-time traced Neuron models (torch-neuron on inf1, torch_neuronx.trace on inf2/trn1) ----------

RUN_ON_NEURON = (
    'load the original checkpoint (`from_pretrained(..., device_map="neuron")`) or move the model to device '
    '"neuron" on trn2 / trn3, and compile it with `torch.compile(model, backend="neuron", fullgraph=True, '
    "dynamic=False)`; nothing is traced or saved ahead of time"
)
PER_PROCESS_CORES = (
    'to use several NeuronCores, run one process per core with torchrun (each on `torch.device("neuron", '
    "LOCAL_RANK)`) and split the inputs between them; pad batches to one fixed size (no dynamic shapes)"
)
PLACEMENT = 'place the model with `model.to(torch.device("neuron", index))` instead'
ANALYZE = (
    'remove it: run the model on device "neuron" and compile it with `torch.compile(model, backend="neuron", '
    "fullgraph=True)`, which stops at what it cannot compile"
)
NO_ARTIFACT = (
    'remove it: there is no traced artifact to load; the model is loaded on device "neuron" and compiled when '
    "it first runs"
)
NEURON_CORE_PLACEMENT = ("neuron_cores_context", "multicore_context", "set_neuron_cores", "set_multicore")

# The inf1 package `torch_neuron` (torch-neuron, compiler neuron-cc) and the `torch.neuron.*` APIs its
# import registers: API (after `torch.neuron.` / `torch_neuron.`) -> what to do instead. On TorchNeuron
# `torch.neuron` is the device module (`is_available`, `device_count`, like `torch.cuda`): not these.
INF1_PACKAGE = "torch_neuron"
INF1_NAMESPACE = "torch.neuron"
INF1_APIS: dict[str, str] = {
    "trace": RUN_ON_NEURON,
    "trace_module": RUN_ON_NEURON,  # `trace` of several methods of one module
    "DataParallel": PER_PROCESS_CORES,
    "analyze_model": ANALYZE,
    **{f"experimental.{name}": PLACEMENT for name in NEURON_CORE_PLACEMENT},
}
INF1_CALLS = frozenset(f"{prefix}.{api}" for prefix in (INF1_NAMESPACE, INF1_PACKAGE) for api in INF1_APIS)

# torch_neuronx helpers that serve a model traced with `torch_neuronx.trace` (inf2/trn1 inference): qualified
# name -> what to do instead (the trace itself is NM317).
TRACED_SERVING: dict[str, str] = {
    "torch_neuronx.DataParallel": PER_PROCESS_CORES,
    "torch_neuronx.dynamic_batch": (
        "pad each batch to one fixed size (TorchNeuron has no dynamic shapes: each new shape compiles again)"
    ),
    "torch_neuronx.async_load": NO_ARTIFACT,
    "torch_neuronx.lazy_load": NO_ARTIFACT,
    "torch_neuronx.replace_weights": (
        "load the new weights into the model itself (`model.load_state_dict(...)`): a model compiled with "
        "torch.compile reads its current parameters"
    ),
    "torch_neuronx.move_trace_to_device": 'place the model with `model.to(torch.device("neuron", index))`',
    "torch_neuronx.analyze": ANALYZE,
    **{f"torch_neuronx.experimental.{name}": PLACEMENT for name in NEURON_CORE_PLACEMENT},
}

# Calls that return a traced Neuron model (a TorchScript module with compiled Neuron graphs in it).
TRACE_CALLS = frozenset(
    {
        "torch_neuronx.trace",
        "torch_neuronx.xla_impl.trace.trace",
        "torch.neuron.trace",
        f"{INF1_PACKAGE}.trace",
        "torch.neuron.trace_module",
        f"{INF1_PACKAGE}.trace_module",
    }
)
