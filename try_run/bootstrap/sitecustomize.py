"""`neuron-migrate try`'s instrumentation, loaded by Python at start-up into every process of a try.

`try_run` puts this folder first on PYTHONPATH and describes the run in the NEURON_MIGRATE_TRY
environment variable, so the script, torchrun's workers and a notebook's kernel all load it, and the user's
files are never edited. Without that variable it does nothing but hand over to the next sitecustomize.

What it does, each through the library's own extension point where one exists:
- caps the processes a launcher starts (torchrun / accelerate launch arguments, at most the try's
  `max_processes`, one node), and
  fits the parallel degrees of a `DistributedConfig` to the processes the try runs when it runs fewer than
  the code was written for (tp_size=8 -> 2; a size computed as 0 from the smaller world -> 1);
- counts optimizer steps with a global optimizer step hook and ends a hand-written loop cleanly after the
  cap (SystemExit(0) from the hook); a Trainer gets `max_steps` and a stopping callback instead, so its own
  end-of-training code (saving into the temporary run folder) still runs;
- records the loss of every backward pass on a scalar (finite or not);
- caps generation to a few new tokens (after Transformers merges the user's generate() arguments);
- records Dynamo's recompiles with the guard failures Dynamo gives as reasons, each attributed to the
  nearest frame of the user's own code, plus graph counts and graph breaks from Dynamo's counters;
- records the user's frame nearest to an uncaught exception;
- writes what it saw to REPORT_DIR/<pid>.json (after each step and at exit).
"""

from __future__ import annotations

import atexit
import importlib.machinery
import importlib.util
import json
import math
import os
import sys
import time
import traceback

_HERE = os.path.dirname(os.path.abspath(__file__))
_CONFIG = json.loads(os.environ.get("NEURON_MIGRATE_TRY") or "null")
LAUNCHER_PROCESS_OPTIONS = ("--nproc_per_node", "--nproc-per-node", "--num_processes", "--num-processes")
LAUNCHER_NODE_OPTIONS = ("--nnodes", "--num_machines", "--num-machines")
# The processes the user's launcher asked for, when the try started fewer (set by the launcher's bootstrap
# for its workers); the runner sets "fewer_processes" itself when it chose torchrun for a script.
ASKED_WORLD = "NEURON_MIGRATE_TRY_ASKED_WORLD"
# DistributedConfig's degrees, in the order they are fitted to the processes the try runs.
PARALLEL_SIZES = ("tp_size", "pp_size", "fsdp_size", "dp_replicate_size")
KEPT_LOSSES = 20


class _State:
    def __init__(self, config: dict) -> None:
        self.config = config
        self.started = time.time()
        self.role = "worker"
        self.steps = 0
        self.losses: list[float] = []
        self.loss_count = 0
        self.nonfinite_losses = 0
        self.trainer_running = 0
        self.stopped_at_cap = False
        self.recompiles: list[dict] = []
        self.generate_calls = 0
        self.models: list[dict] = []
        self.error: dict | None = None
        self.launcher_capped: list[str] = []
        self.set_up_exits: dict[int, int] = {}  # a notebook's set-up lines (in the plan's order): exit codes
        self.marks: dict[
            str, float
        ] = {}  # seconds since start-up: torch imported, first load, first/last step

    def set_up_exit(self, index: int, code: int) -> None:
        self.set_up_exits[index] = code
        self.write()

    def mark(self, name: str, first_only: bool = True) -> None:
        if not first_only or name not in self.marks:
            self.marks[name] = round(time.time() - self.started, 3)

    # -- what the user's own code is -------------------------------------------------------------------
    def user_location(self, filename: str, line: int) -> dict | None:
        """{file, line} in the user's tree (sandbox paths mapped back), or a notebook cell's source."""
        real = os.path.realpath(filename) if os.path.isabs(filename) else filename
        for sandbox, origin in self.config.get("roots", {}).items():
            if real == sandbox or real.startswith(sandbox + os.sep):
                if "site-packages" in real or "dist-packages" in real:
                    return None
                return {"file": os.path.normpath(origin + real[len(sandbox) :]), "line": line}
        if self.config.get("notebook") and _is_cell_file(filename):
            import linecache

            return {"file": filename, "line": line, "cell_source": "".join(linecache.getlines(filename))}
        return None

    def nearest_user_frame(self, frames) -> dict | None:
        """The innermost frame of user code in `frames` (outermost first)."""
        for frame in reversed(frames):
            location = self.user_location(frame.filename, frame.lineno)
            if location is not None:
                location["code"] = (frame.line or "").strip()
                return location
        return None

    # -- report -----------------------------------------------------------------------------------------
    def snapshot(self) -> dict:
        report = {
            "pid": os.getpid(),
            "role": self.role,
            "rank": os.environ.get("RANK"),
            "argv": sys.argv,
            "steps": self.steps,
            "stopped_at_step_cap": self.stopped_at_cap,
            "losses": self.losses[-KEPT_LOSSES:],
            "loss_count": self.loss_count,
            "nonfinite_losses": self.nonfinite_losses,
            "recompiles": self.recompiles,
            "generate_calls": self.generate_calls,
            "models": self.models,
            "error": self.error,
            "launcher_capped": self.launcher_capped,
            "set_up_exits": self.set_up_exits,
            "seconds": round(time.time() - self.started, 3),
            "marks": self.marks,
        }
        report.update(_compile_metrics())
        return report

    def write(self) -> None:
        folder = self.config.get("report_dir")
        if not folder:
            return
        path = os.path.join(folder, f"{os.getpid()}.json")
        try:
            with open(path + ".tmp", "w", encoding="utf-8") as handle:
                json.dump(self.snapshot(), handle, default=str)
            os.replace(path + ".tmp", path)
        except OSError:
            pass


def _is_cell_file(filename: str) -> bool:
    return "ipykernel_" in filename or filename.startswith("<ipython-input")


def _compile_metrics() -> dict:
    """Dynamo's own counters (graphs, graph breaks, and the graphs the neuron backend compiled, which it
    counts in counters["neuron"] as TorchNeuron does), and the ops the neuron rules flagged."""
    metrics: dict = {}
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is not None:
        counters = utils.counters
        metrics["unique_graphs"] = int(counters["stats"]["unique_graphs"])
        metrics["graph_breaks"] = {
            str(reason): int(count) for reason, count in counters["graph_break"].items()
        }
        metrics["device_graphs"] = int(counters["neuron"]["compiled_graphs"])
        # Dynamo's own timing of each frame compile (tracing, AOT autograd's forward, the backend).
        metrics["compile_seconds"] = round(
            sum(utils.compilation_time_metrics.get("_compile.compile_inner", [])), 3
        )
    rules = sys.modules.get("standin.sim_backend")
    fallbacks: set[str] = set()
    if rules is not None:
        metrics["unsupported_ops"] = rules.STATE.as_list()
        # The stand-in's eager dispatch applies these rules too (sim_backend.check_op_and_dtypes), so its CPU
        # fallbacks are among them, named as the rules name them (aten.op; torch_neuronx says aten::op).
        fallbacks = rules.STATE.cpu_fallbacks
    metrics["cpu_fallback_ops"] = sorted(fallbacks)
    return metrics


# -- launchers ------------------------------------------------------------------------------------------
def _launcher_kind(argv: list[str]) -> str | None:
    """torchrun / python -m torch.distributed.run / accelerate launch, from the full command line."""
    words = [os.path.basename(word) for word in argv[:4]]
    if "torchrun" in words[:2]:
        return "torchrun"
    if "-m" in argv[:3]:
        module = argv[argv.index("-m") + 1] if argv.index("-m") + 1 < len(argv) else ""
        if module in ("torch.distributed.run", "torch.distributed.launch"):
            return "torchrun"
    if "accelerate" in words and "launch" in argv[:4]:
        return "accelerate"
    return None


def _cap_launcher_arguments(argv: list[str], max_processes: int) -> tuple[list[str], int]:
    """Caps, in place, the process and node counts a launcher's options ask for (the options before the
    script or module it launches); returns what it changed and the processes asked for (0: not known)."""
    changed = []
    asked = {"processes": 1, "nodes": 1}
    end = next(
        (i for i, word in enumerate(argv) if i and (word.endswith(".py") or word in ("-m", "--module"))),
        len(argv),
    )
    for index in range(1, end):
        name, has_value, value = argv[index].partition("=")
        if name not in LAUNCHER_PROCESS_OPTIONS + LAUNCHER_NODE_OPTIONS:
            continue
        limit = max_processes if name in LAUNCHER_PROCESS_OPTIONS else 1
        position = index if has_value else index + 1
        current = value if has_value else (argv[position] if position < end else "")
        asked["processes" if name in LAUNCHER_PROCESS_OPTIONS else "nodes"] = (
            int(current) if current.isdigit() else 0
        )
        if not current.isdigit() or int(current) > limit:
            argv[position] = f"{name}={limit}" if has_value else str(limit)
            changed.append(f"{name} {current} -> {limit}")
    return changed, asked["processes"] * asked["nodes"]


# -- hooks installed when the libraries are imported ---------------------------------------------------
class _AfterImport:
    """A meta path finder that runs a function on a module right after it is first executed."""

    def __init__(self, hooks: dict) -> None:
        self.hooks = hooks

    def find_spec(self, name, path, target=None):
        hook = self.hooks.get(name)
        if hook is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        # find_spec is also called by availability checks (importlib.util.find_spec) that never import: the
        # hook is consumed when the module is executed, not when it is found.
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            if self.hooks.pop(name, None) is not None:
                hook(module)

        spec.loader.exec_module = exec_module
        return spec


def _after_torch(torch) -> None:
    import logging

    from torch.optim.optimizer import register_optimizer_step_post_hook

    if (
        os.environ.get("NEURON_STANDIN") == "1"
    ):  # (idempotent) where torch's autoload has no entry point for it:
        import standin  # an environment without neuron-migrate (--python); the try put the package on the path

        standin.autoload()
    STATE.mark("torch_imported")

    def after_step(optimizer, args, kwargs):
        STATE.steps += 1
        STATE.mark("first_step")
        STATE.mark("last_step", first_only=False)
        STATE.write()
        if STATE.steps >= STATE.config["steps"] and not STATE.trainer_running:
            STATE.stopped_at_cap = True
            raise SystemExit(0)

    register_optimizer_step_post_hook(after_step)

    backward = torch.autograd.backward

    def recording_backward(tensors, *args, **kwargs):
        if isinstance(tensors, torch.Tensor) and tensors.numel() == 1:
            value = float(tensors.detach().float().cpu())
            STATE.loss_count += 1
            STATE.losses.append(value)
            if not math.isfinite(value):
                STATE.nonfinite_losses += 1
        return backward(tensors, *args, **kwargs)

    torch.autograd.backward = recording_backward

    class RecompileHandler(logging.Handler):
        def emit(self, record):
            message = record.getMessage()
            lines = message.splitlines()
            reasons = [line.strip()[2:] for line in lines[2:] if line.strip().startswith("- ")]
            entry = {
                "function": lines[0].replace("Recompiling function ", "") if lines else "",
                "reasons": reasons,
            }
            entry["user"] = STATE.nearest_user_frame(traceback.extract_stack()[:-1])
            STATE.recompiles.append(entry)

    # Dynamo logs a recompile (with its guard failures) only while the "recompiles" artifact is on; its
    # logger is configured when torch._dynamo.guards is imported, so ours is set after that.
    torch._logging._internal.log_state.enable_artifact("recompiles")

    def after_guards(guards):
        guards.recompiles_log.handlers = [RecompileHandler()]
        guards.recompiles_log.setLevel(logging.DEBUG)
        guards.recompiles_log.propagate = False

    if "torch._dynamo.guards" in sys.modules:  # the stand-in's autoload imports Dynamo within `import torch`
        after_guards(sys.modules["torch._dynamo.guards"])
    else:
        sys.meta_path.insert(0, _AfterImport({"torch._dynamo.guards": after_guards}))


def _after_trainer(module) -> None:
    from transformers import TrainerCallback

    class StepCap(TrainerCallback):
        """Bounds a Trainer run to the try's steps and keeps its output in the run's temporary folder."""

        def on_init_end(self, args, state, control, **kwargs):
            cap = STATE.config["steps"]
            if args.max_steps is None or args.max_steps <= 0 or args.max_steps > cap:
                args.max_steps = cap
            args.logging_steps = 1
            output = STATE.config.get("output_dir")
            if output and (not args.output_dir or os.path.isabs(args.output_dir)):
                args.output_dir = output

        def on_train_begin(self, args, state, control, **kwargs):
            STATE.trainer_running += 1

        def on_train_end(self, args, state, control, **kwargs):
            STATE.trainer_running -= 1

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step >= STATE.config["steps"]:
                control.should_training_stop = True
                STATE.stopped_at_cap = True

    module.DEFAULT_CALLBACKS.append(StepCap)


def _after_generation(module) -> None:
    mixin = module.GenerationMixin
    prepare = mixin._prepare_generation_config

    def capped(self, *args, **kwargs):
        generation_config, model_kwargs = prepare(self, *args, **kwargs)
        cap = STATE.config["max_new_tokens"]
        if generation_config.max_new_tokens is None or generation_config.max_new_tokens > cap:
            generation_config.max_new_tokens = cap
        if generation_config.min_new_tokens is not None and generation_config.min_new_tokens > cap:
            generation_config.min_new_tokens = cap
        STATE.generate_calls += 1
        return generation_config, model_kwargs

    mixin._prepare_generation_config = capped


def _after_diffusion_pipeline(module) -> None:
    """Every Diffusers pipeline defined from now on runs at most `denoising_steps` steps (its own default,
    often 50, included): a subclass's __call__ is wrapped when the class is created."""
    import functools
    import inspect

    base = module.DiffusionPipeline
    cap = STATE.config["denoising_steps"]

    def capping(call):
        signature = inspect.signature(call)
        if "num_inference_steps" not in signature.parameters:
            return call

        @functools.wraps(call)
        def capped(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            asked = bound.arguments
            if (
                asked.get("timesteps") is None and asked.get("sigmas") is None
            ):  # else the script's own schedule
                asked["num_inference_steps"] = min(asked.get("num_inference_steps") or cap, cap)
            return call(*bound.args, **bound.kwargs)

        return capped

    def init_subclass(cls, **kwargs):
        super(base, cls).__init_subclass__(**kwargs)
        if "__call__" in cls.__dict__:
            cls.__call__ = capping(cls.__dict__["__call__"])

    base.__init_subclass__ = classmethod(init_subclass)


def _after_modeling(module) -> None:
    pretrained = module.PreTrainedModel
    load = pretrained.from_pretrained.__func__

    def recording_from_pretrained(cls, name_or_path, *args, **kwargs):
        STATE.mark("first_model_load")
        model = load(cls, name_or_path, *args, **kwargs)
        try:
            parameters = sum(p.numel() for p in model.parameters())
        except Exception:
            parameters = None
        STATE.models.append(
            {
                "id": str(name_or_path),
                "class": type(model).__name__,
                "model_type": getattr(getattr(model, "config", None), "model_type", None),
                "parameters": parameters,
                "vocab_size": getattr(getattr(model, "config", None), "vocab_size", None),
            }
        )
        return model

    pretrained.from_pretrained = classmethod(recording_from_pretrained)


def _after_distributed_config(module) -> None:
    """A try runs at most `max_processes` processes: where it runs fewer than the code was written for, the degrees of a
    DistributedConfig are fitted to them (and said so), so that the sharded code paths still run."""
    config_class = module.DistributedConfig
    resolve = config_class.__post_init__

    def fitted(self):
        world = int(os.environ.get("WORLD_SIZE", "1"))
        asked = int(os.environ.get(ASKED_WORLD) or 0)
        if world > 1 and (STATE.config.get("fewer_processes") or asked > world):
            _fit_degrees(self, world, asked)
        resolve(self)

    config_class.__post_init__ = fitted


def _fit_degrees(config, world: int, asked: int) -> None:
    sizes = {name: getattr(config, name) for name in PARALLEL_SIZES if getattr(config, name) is not None}
    wanted = math.prod(max(1, size) for size in sizes.values())
    if wanted <= world or (asked and wanted > asked):
        return  # it fits, or it would not fit the processes asked for either: that failure is the script's
    left = world
    for name, size in sizes.items():
        new = max(1, min(size, left))
        while left % new:
            new -= 1
        left //= new
        if new != size:
            setattr(config, name, new)
            STATE.launcher_capped.append(f"DistributedConfig {name} {size} -> {new}")
    if config.ep_size is not None and config.ep_size > (config.tp_size or 1) * (config.fsdp_size or 1):
        STATE.launcher_capped.append(f"DistributedConfig ep_size {config.ep_size} -> {config.tp_size or 1}")
        config.ep_size = config.tp_size or 1


# -- errors ---------------------------------------------------------------------------------------------
def _record_exception(kind, value, tb) -> None:
    frames = traceback.extract_tb(tb)
    chain, cause = [], value
    while cause is not None and len(chain) < 5:
        chain.append(type(cause).__name__)
        cause = cause.__cause__ or cause.__context__
    message = str(value).strip()
    STATE.error = {
        "type": kind.__name__,
        "message": message[:2000],
        "chain": chain,
        "user": STATE.nearest_user_frame(frames),
        "raised_at": {"file": frames[-1].filename, "line": frames[-1].lineno} if frames else None,
        "time": time.time(),  # among ranks, the first error is the cause; the others see a closed connection
    }
    STATE.write()


def _install(config: dict) -> None:
    global STATE
    STATE = _State(config)
    argv = list(getattr(sys, "orig_argv", sys.argv))
    if _launcher_kind(argv):
        STATE.role = "launcher"
        STATE.launcher_capped, asked = _cap_launcher_arguments(sys.argv, config["max_processes"])
        if STATE.launcher_capped and asked:
            os.environ[ASKED_WORLD] = str(asked)  # for its workers
    sys.meta_path.insert(
        0,
        _AfterImport(
            {
                "torch": _after_torch,
                "transformers.trainer": _after_trainer,
                "transformers.generation.utils": _after_generation,
                "transformers.modeling_utils": _after_modeling,
                "diffusers.pipelines.pipeline_utils": _after_diffusion_pipeline,
                "transformers.distributed.configuration_utils": _after_distributed_config,
            }
        ),
    )
    previous_hook = sys.excepthook

    def excepthook(kind, value, tb):
        _record_exception(kind, value, tb)
        previous_hook(kind, value, tb)

    sys.excepthook = excepthook
    if config.get("notebook"):
        _watch_ipython()
    atexit.register(STATE.write)


def _watch_ipython() -> None:
    """In a notebook's kernel, exceptions of a cell never reach sys.excepthook: IPython shows them itself."""

    def after_interactiveshell(module):
        shell_class = module.InteractiveShell
        show = shell_class.showtraceback

        def recording_showtraceback(self, *args, **kwargs):
            kind, value, tb = sys.exc_info()
            if value is not None and not isinstance(value, KeyboardInterrupt):
                _record_exception(kind, value, tb)
            return show(self, *args, **kwargs)

        shell_class.showtraceback = recording_showtraceback

    sys.meta_path.insert(0, _AfterImport({"IPython.core.interactiveshell": after_interactiveshell}))


def _chain_next_sitecustomize() -> None:
    """Runs the sitecustomize this one shadows (a distribution's or a virtualenv's), if there is one."""
    rest = [entry for entry in sys.path if os.path.abspath(entry or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None and os.path.dirname(spec.origin or "") != _HERE:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


STATE: _State | None = None
if _CONFIG:
    _install(_CONFIG)
_chain_next_sitecustomize()
