"""`neuron-migrate try`'s instrumentation, loaded by Python at start-up into every process of a try.

`try_run` puts this folder first on PYTHONPATH and describes the run in the NEURON_MIGRATE_TRY
environment variable, so the script, torchrun's workers and a notebook's kernel all load it, and the user's
files are never edited. Without that variable it does nothing but hand over to the next sitecustomize.

What it does, each through the library's own extension point where one exists:
- caps the processes a launcher starts (torchrun / accelerate launch arguments, at most the try's
  `max_processes`, one node), and
  fits the parallel degrees of a `DistributedConfig` to the processes the try runs when it runs fewer than
  the code was written for (tp_size=8 -> 2; tp_size=8, fsdp_size=4 on 4 -> 2 x 2, every asked dimension kept
  real; a size computed as 0 from the smaller world -> 1);
- counts optimizer steps with a global optimizer step hook and ends a hand-written loop cleanly after the
  cap (SystemExit(0) from the hook); a Trainer gets `max_steps` and a stopping callback instead, so its own
  end-of-training code (saving into the temporary run folder) still runs;
- records the loss of every backward pass on a scalar (finite or not);
- caps generation to a few new tokens (after Transformers merges the user's generate() arguments);
- records Dynamo's recompiles with the guard failures Dynamo gives as reasons, each attributed to the
  nearest frame of the user's own code, plus graph counts and graph breaks from Dynamo's counters;
- records the user's frame nearest to an uncaught exception;
- stands in, when the code loads it, for a Hub dataset the try did not see before the run (an id built at run
  time, or given to a script the try could not read: a launcher's subprocess command line), with the try's own
  data stand-ins (try_run/data.py, loaded by its path: the columns of the data table, else those the code reads);
- does the same for an evaluate metric the try stands in for (try_run/metrics.py: accuracy, f1, glue, ...);
- writes the files a torchvision MNIST-family or CIFAR download() would extract (try_run/data.py), before it looks
  for them;
- serves a GET of an image URL (requests, httpx) with a stand-in picture in the format the URL names, the
  URL recorded (no network reaches a try); other URLs fail as they do offline;
- lets torchvision import without its compiled operators where they cannot load against this torch (a wheel built
  for another one), as torchvision means to (`_after_torchvision_extension`);
- records the Hub writes a script asks for (create_repo, commits, branches, tags: what push_to_hub and
  upload_folder come down to; deletions, moves, settings) after doing their local part, and sends nothing;
  answers whoami and login with a stand-in account, and reads of a repository the run wrote with what it wrote;
- writes what it saw to REPORT_DIR/<pid>.json (after each step and at exit);
- for `neuron-migrate bench` (config "bench"), nothing is capped but the step or request count: it times
  every optimizer step and generate() call with the device synchronized at its end, counts the samples and
  tokens of the DataLoader batches seen, and reads the device's peak memory (see `_Bench`).
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import importlib.machinery
import importlib.util
import json
import math
import os
import re
import sys
import time
import traceback
from typing import NamedTuple

_HERE = os.path.dirname(os.path.abspath(__file__))
_CONFIG = json.loads(os.environ.get("NEURON_MIGRATE_TRY") or "null")
# The try's own code (try_run/, its bootstrap, the stand-in device): never the user's, even in a tree that holds it.
_OURS = tuple(
    os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(_HERE))), name) + os.sep
    for name in ("try_run", "standin")
)
LAUNCHER_PROCESS_OPTIONS = ("--nproc_per_node", "--nproc-per-node", "--num_processes", "--num-processes")
LAUNCHER_NODE_OPTIONS = ("--nnodes", "--num_machines", "--num-machines")
# The processes the user's launcher asked for, when the try started fewer (set by the launcher's bootstrap
# for its workers); the runner sets "fewer_processes" itself when it chose torchrun for a script.
ASKED_WORLD = "NEURON_MIGRATE_TRY_ASKED_WORLD"
# DistributedConfig's degrees, in the order they are fitted to the processes the try runs.
PARALLEL_SIZES = ("tp_size", "pp_size", "fsdp_size", "dp_replicate_size")
KEPT_LOSSES = 20
# Dynamo's warning (convert_frame.py) where a frame reaches its recompile limit and runs eagerly from then on.
LIMIT_HIT = re.compile(
    r"torch\._dynamo hit config\.(?P<type>\w+) \((?P<limit>\d+)\)\n\s*function: '(?P<name>.*)' \((?P<where>.*)\)\n"
    r"\s*last reason: (?P<reason>.*)"
)


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
        self.recompile_limit_hits: list[dict] = []  # frames Dynamo stopped compiling: they ran eagerly after
        self.generate_calls = 0
        self.models: list[dict] = []
        self.error: dict | None = None
        self.launcher_capped: list[str] = []
        self.pinned_revisions: list[dict] = []  # downloads of a revision the one-revision stand-in served
        self.weights: list[dict] = []  # torchvision pretrained weights stood in (_after_torchvision_weights)
        self.checkpoint_links: list[dict] = []  # a full run's last checkpoint -> the try's last one (StepCap)
        self.uploads: list[dict] = []  # Hub writes recorded, not sent (_after_hf_api)
        self.hub_account: list[dict] = []  # whoami, login, logout: answered by the stand-in account
        self.datasets: list[dict] = []  # stand-ins written when the code loaded them (_after_datasets_load)
        self.unserved_datasets: dict[str, str] = {}  # dataset id -> why it could not be stood in at load
        self.metrics: list[dict] = []  # metric stand-ins written when the code loaded them
        self.images: list[dict] = []  # image URLs served with a stand-in picture (_stand_in_image)
        self.local_dirs: list[dict] = []  # stand-ins copied into a download's local_dir
        self.foreign_magics: list[str] = []  # magics of another kernel, not run (a notebook's kernel)
        self.missing_native_ops: list[str] = []  # packages imported without their compiled operators
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
                if "site-packages" in real or "dist-packages" in real or real.startswith(_OURS):
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
            "recompile_limit_hits": self.recompile_limit_hits,
            "generate_calls": self.generate_calls,
            "models": self.models,
            "error": self.error,
            "launcher_capped": self.launcher_capped,
            "checkpoint_links": self.checkpoint_links,
            "weights": self.weights,
            "pinned_revisions": self.pinned_revisions,
            "local_dirs": self.local_dirs,
            "foreign_magics": self.foreign_magics,
            "missing_native_ops": self.missing_native_ops,
            "set_up_exits": self.set_up_exits,
            "uploads": self.uploads,
            "hub_account": self.hub_account,
            "images": self.images,
            "datasets": self.datasets,
            "unserved_datasets": self.unserved_datasets,
            "metrics": self.metrics,
            "seconds": round(time.time() - self.started, 3),
            "marks": self.marks,
        }
        report.update(_compile_metrics())
        if BENCH is not None:
            report["bench"] = BENCH.report()
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
    metrics["device_peak_bytes"] = _device_peak_bytes()
    return metrics


def _device_peak_bytes() -> int:
    """The most memory the process held on its neuron device (`torch.neuron.max_memory_allocated`, the
    stand-in's and TorchNeuron's): 0 where the code never reached the device."""
    torch = sys.modules.get("torch")
    runtime = getattr(torch, "neuron", None) if torch is not None else None
    try:
        return int(runtime.max_memory_allocated()) if runtime is not None else 0
    except Exception:  # no device in this process (a launcher), or a runtime without the statistic
        return 0


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
def _after_import_module():
    """standin/after_import.py, read by its path: this interpreter may not import the project."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    spec = importlib.util.spec_from_file_location(
        "_neuron_migrate_after_import", os.path.join(root, "standin", "after_import.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_after_import = _after_import_module()
_AfterImport = _after_import.AfterImport


def _after_torchvision_extension(extension) -> None:
    """torchvision whose compiled operators do not load (a wheel built for another torch: a registry's CUDA build
    beside a CPU-only torch) is meant to import all the same, each operator failing when it is called
    (`_assert_has_ops`), and it skips registering their fake kernels then; but two of those registrations (nms,
    qnms) are unconditional and stop `import torchvision`. They are skipped too, where their operator is not
    defined, so the program's datasets, transforms and models run; the report says the operators are missing."""
    if extension._has_ops():
        return
    import torch
    import torch.library

    register_fake = torch.library.register_fake

    def register_fake_if_defined(op, func=None, /, *args, **kwargs):
        undefined = (
            isinstance(op, str)
            and op.startswith("torchvision::")
            and not hasattr(torch.ops.torchvision, op.split("::", 1)[1])
        )
        if undefined:
            return func if func is not None else (lambda kernel: kernel)
        return register_fake(op, func, *args, **kwargs)

    torch.library.register_fake = register_fake_if_defined
    STATE.missing_native_ops.append("torchvision")


def _after_torchvision_weights(api) -> None:
    """torchvision's pretrained weights (`resnet50(weights="DEFAULT")`, `pretrained=True`), a file it downloads from
    download.pytorch.org into torch's hub cache, with no network in a try: where that cache has no copy, the
    architecture's own random initialisation stands in (the builder the weights belong to, without weights, with
    as many classes as the weights' categories: the same keys and shapes), recorded with the user's line. A model
    whose builder cannot be found or built fails as the download does offline."""
    get_state_dict = api.WeightsEnum.get_state_dict

    def stand_in_state_dict(self, *args, **kwargs):
        from urllib.parse import urlparse

        import torch.hub

        cached = os.path.join(torch.hub.get_dir(), "checkpoints", os.path.basename(urlparse(self.url).path))
        if os.path.exists(cached):
            return get_state_dict(self, *args, **kwargs)
        try:
            state = _torchvision_initial_state(api, self)
        except Exception:
            return get_state_dict(self, *args, **kwargs)
        STATE.weights.append(
            {
                "weights": repr(self),
                "url": self.url,
                "user": STATE.nearest_user_frame(traceback.extract_stack()),
            }
        )
        STATE.write()
        return state

    api.WeightsEnum.get_state_dict = stand_in_state_dict


def _torchvision_initial_state(api, weights) -> dict:
    """The state dict of the model torchvision builds for `weights`, built without them."""
    import inspect

    def takes(name: str) -> bool:
        try:
            return api.get_model_weights(name) is type(weights)
        except ValueError:  # a builder without a weights enum
            return False

    name = next(name for name in api.list_models() if takes(name))
    builder = api.get_model_builder(name)
    options = {"weights": None}
    categories = weights.meta.get("categories")
    if categories:
        options["num_classes"] = len(categories)
    if "weights_backbone" in inspect.signature(builder).parameters:
        options["weights_backbone"] = None
    return builder(**options).state_dict()


def _after_torch(torch) -> None:
    from torch.optim.optimizer import register_optimizer_step_post_hook

    if (
        os.environ.get("NEURON_STANDIN") == "1"
    ):  # (idempotent) where torch's autoload has no entry point for it:
        import standin  # an environment without neuron-migrate (--python); the try put the package on the path

        standin.autoload()
    STATE.mark("torch_imported")

    def after_step(optimizer, args, kwargs):
        STATE.steps += 1
        if BENCH is not None:
            BENCH.step_ended()
        else:
            STATE.mark("first_step")
            STATE.mark("last_step", first_only=False)
            STATE.write()
        if STATE.steps >= STATE.config["steps"] and not STATE.trainer_running:
            STATE.stopped_at_cap = True
            raise SystemExit(0)

    register_optimizer_step_post_hook(after_step)
    if BENCH is not None:
        BENCH.start(torch)
        _install_recompile_log(torch)
        return  # a bench leaves backward alone: reading each loss would synchronize the device every step

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
    _install_recompile_log(torch)


def _install_recompile_log(torch) -> None:
    import logging

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
            if BENCH is not None:  # the step and request it happened in, whose time it lengthened
                entry.update(BENCH.current_units())
            STATE.recompiles.append(entry)

    class LimitHandler(logging.Handler):
        def emit(self, record):
            hit = LIMIT_HIT.match(record.getMessage())
            if hit is None:
                return
            function = f"{hit['name']} in {hit['where']}"  # as the recompile log names it
            if STATE.recompiles and STATE.recompiles[-1]["function"] == function:
                STATE.recompiles.pop()  # logged just before, as a recompile: it was not compiled
            entry = {"limit_type": hit["type"], "limit": int(hit["limit"]), "function": function}
            entry["last_reason"] = hit["reason"].strip()
            entry["user"] = STATE.nearest_user_frame(traceback.extract_stack()[:-1])
            STATE.recompile_limit_hits.append(entry)

    # Dynamo's warning where a frame reaches config.recompile_limit: the frame runs eagerly from then on. Its
    # module logs under its own name, which torch._logging never reconfigures (it owns "torch._dynamo").
    logging.getLogger("torch._dynamo.convert_frame").addHandler(LimitHandler(logging.WARNING))
    # Dynamo logs a recompile (with its guard failures) only while the "recompiles" artifact is on; its
    # logger is configured when torch._dynamo.guards is imported, so ours is set after that.
    torch._logging._internal.log_state.enable_artifact("recompiles")

    def after_guards(guards):
        guards.recompiles_log.handlers = [RecompileHandler()]
        guards.recompiles_log.setLevel(logging.DEBUG)
        guards.recompiles_log.propagate = False
        if STATE.config.get("recompile_limit"):  # --recompile-limit; the user's own setting, made later, wins
            sys.modules["torch._dynamo.config"].recompile_limit = STATE.config["recompile_limit"]

    # (Dynamo is imported by the first compile, or with a library that imports it: Transformers' models do)
    _after_import.after_import("torch._dynamo.guards", after_guards)


def _after_trainer(module) -> None:
    from transformers import TrainerCallback

    class StepCap(TrainerCallback):
        """Bounds a Trainer run to the try's steps and keeps its output in the run's temporary folder."""

        def on_init_end(self, args, state, control, **kwargs):
            cap = STATE.config["steps"]
            self.asked_steps = args.max_steps if args.max_steps and args.max_steps > cap else None
            if args.max_steps is None or args.max_steps <= 0 or args.max_steps > cap:
                args.max_steps = cap
            if BENCH is None:  # a bench keeps the script's logging: logging reads the loss (a device sync)
                args.logging_steps = 1
            output = STATE.config.get("output_dir")
            # A try's relative output_dir is inside its copy already (and, in a copy-on-write sandbox, any other:
            # then no folder is given); a bench runs in the user's folder, where a few steps' checkpoints (or a
            # save_model() after train()) would overwrite the user's.
            if output and (BENCH is not None or not args.output_dir or os.path.isabs(args.output_dir)):
                args.output_dir = output

        def on_train_begin(self, args, state, control, **kwargs):
            STATE.trainer_running += 1

        def on_train_end(self, args, state, control, **kwargs):
            STATE.trainer_running -= 1
            # With a step save strategy the full run's last checkpoint is checkpoint-<max_steps>, a folder
            # code after train() reads by that name: the try's last checkpoint stands for it.
            if self.asked_steps and args.save_strategy == "steps" and state.is_world_process_zero:
                last = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
                full = os.path.join(args.output_dir, f"checkpoint-{self.asked_steps}")
                if os.path.isdir(last) and not os.path.lexists(full):
                    os.symlink(os.path.basename(last), full)
                    STATE.checkpoint_links.append(
                        {"asked": os.path.basename(full), "written": os.path.basename(last)}
                    )

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step >= STATE.config["steps"]:
                control.should_training_stop = True
                STATE.stopped_at_cap = True

    module.DEFAULT_CALLBACKS.append(StepCap)


def _after_generation(module) -> None:
    mixin = module.GenerationMixin
    if BENCH is not None:
        BENCH.time_generate(mixin, module)
        return
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


def _serve_local_dir(module, name: str) -> None:
    """Offline, `snapshot_download(repo_id, local_dir=DIR)` (and `hf_hub_download`) look for the files in DIR only:
    where the try's Hub cache holds the repository's stand-in, its files are copied into DIR as a download writes
    them (plain files, `allow_patterns` / `ignore_patterns` applied), and DIR is returned; otherwise the library
    answers as it does offline (DIR as it is, or its LocalEntryNotFoundError). `force_download=True` (fetch the
    files again even when cached) is served from the cache too: offline, huggingface_hub refuses it (ValueError),
    and the stand-in has no newer files than those it holds. A stand-in has one revision: a download pinned to
    another (`revision="2.15.0"`, a branch, a commit) gets it, recorded."""
    import functools
    import shutil
    from pathlib import Path

    download = getattr(module, name)

    def from_cache(*args, **kwargs):
        try:
            return download(*args, **kwargs)
        except module.LocalEntryNotFoundError as pinned_error:
            revision = kwargs.pop("revision", None)
            if revision in (None, "main"):
                raise
            try:
                found = download(*args, **kwargs)
            except module.LocalEntryNotFoundError:
                raise pinned_error from None  # no stand-in either: the error of the revision asked for
            _record_pinned(kwargs.get("repo_id", args[0] if args else None), revision)
            return found

    @functools.wraps(download)
    def serving(*args, **kwargs):
        kwargs.pop("force_download", None)
        local_dir = kwargs.pop("local_dir", None)
        if local_dir is None:
            return from_cache(*args, **kwargs)
        try:
            cached = Path(from_cache(*args, **kwargs))  # the snapshot (or file) in the try's Hub cache
        except module.LocalEntryNotFoundError:
            return download(*args, local_dir=local_dir, **kwargs)  # no stand-in: the library's own answer
        snapshot = next(folder for folder in [cached, *cached.parents] if folder.parent.name == "snapshots")
        files = [cached] if cached.is_file() else [path for path in cached.rglob("*") if path.is_file()]
        relative = [path.relative_to(snapshot).as_posix() for path in files]
        from huggingface_hub.utils import filter_repo_objects

        kept = filter_repo_objects(
            relative,
            allow_patterns=kwargs.get("allow_patterns"),
            ignore_patterns=kwargs.get("ignore_patterns"),
        )
        target = Path(local_dir).expanduser().resolve()
        for path in kept:
            (target / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(snapshot / path, target / path)
        STATE.local_dirs.append(
            {"repo_id": kwargs.get("repo_id", args[0] if args else None), "dir": str(target)}
        )
        return str(target / relative[0]) if cached.is_file() else str(target)

    setattr(module, name, serving)
    if name == "hf_hub_download":  # Transformers looks a file up in the cache first, by revision too
        lookup = module.try_to_load_from_cache

        @functools.wraps(lookup)
        def looking_up(repo_id, filename, cache_dir=None, revision=None, repo_type=None):
            found = lookup(repo_id, filename, cache_dir=cache_dir, revision=revision, repo_type=repo_type)
            if found is None and revision not in (None, "main"):
                found = lookup(repo_id, filename, cache_dir=cache_dir, repo_type=repo_type)
                if isinstance(found, str):
                    _record_pinned(repo_id, revision)
            return found

        module.try_to_load_from_cache = looking_up


def _record_pinned(repo_id: str | None, revision: str) -> None:
    if all(pinned["repo_id"] != repo_id for pinned in STATE.pinned_revisions):
        STATE.pinned_revisions.append({"repo_id": repo_id, "revision": revision})


def _after_datasets_load(module) -> None:
    """`load_dataset(ID, CONFIG, split=...)` of a Hub dataset the try's cache does not hold: its stand-in is written
    into the cache the call reads (its `cache_dir`, else HF_DATASETS_CACHE) before `datasets` looks for it, so a
    dataset named at run time is served as one the scan saw is. Local files, folders and `datasets`' packaged
    builders (json, csv, ...) are loaded as they are; a dataset that cannot be stood in (no column known) is left to
    fail as offline, its reason recorded for the run's report."""
    import functools

    load = module.load_dataset

    @functools.wraps(load)
    def loading(path, *args, **kwargs):
        try:
            _serve_dataset(path, args, kwargs)
        except Exception as error:  # never the try's own failure in place of the user's load
            STATE.unserved_datasets[str(path)] = (
                f"dataset {path}: its stand-in could not be written ({error})"
            )
            STATE.write()
        return load(path, *args, **kwargs)

    module.load_dataset = loading


# load_dataset's parameters after `path`, in order: how a call passes them by position.
LOAD_DATASET_PARAMETERS = ("name", "data_dir", "data_files", "split", "cache_dir")


def _serve_dataset(path, args: tuple, kwargs: dict) -> None:
    given = {**dict(zip(LOAD_DATASET_PARAMETERS, args, strict=False)), **kwargs}
    if not isinstance(path, str) or given.get("data_dir") or given.get("data_files"):
        return
    from pathlib import Path

    from datasets import config as datasets_config
    from datasets.packaged_modules import _PACKAGED_DATASETS_MODULES

    if path in _PACKAGED_DATASETS_MODULES or os.path.exists(path) or path.endswith(".py"):
        return
    data = _tool_module("data")
    split = given.get("split")
    request = data.DatasetRequest(
        path,
        given.get("name"),
        set(split.split("+")) if isinstance(split, str) else set(),
        set(STATE.config["datasets"]["columns"]),
        dict(STATE.config["datasets"]["kinds"]),
    )
    cache = given.get("cache_dir") or datasets_config.HF_DATASETS_CACHE
    from datasets.utils import logging as datasets_logging

    bars = datasets_logging.is_progress_bar_enabled()
    datasets_logging.disable_progress_bar()  # the try's own work: no "Generating train split" in the output
    try:
        report = data.serve_at_load(request, Path(cache).expanduser(), STATE.config["datasets"]["min_rows"])
    except data.CannotStandIn as error:
        STATE.unserved_datasets[path] = str(error)
        report = None
    finally:
        if bars:
            datasets_logging.enable_progress_bar()
    if report is not None:
        STATE.datasets.append({**report, "served": "when the code loaded it"})
    STATE.write()


def _torchvision_stand_in(name: str, write) -> None:
    """Writes a torchvision dataset's stand-in files (`write()` returns what the report says of them) and records
    it, or why it could not be written: never the try's own failure in place of the user's download."""
    try:
        report = write()
        if all(served["id"] != report["id"] for served in STATE.datasets):
            STATE.datasets.append({**report, "served": "when the code loaded it"})
    except Exception as error:
        STATE.unserved_datasets[f"torchvision {name}"] = f"its stand-in could not be written ({error})"
    STATE.write()


def _after_torchvision_mnist(module) -> None:
    """torchvision's MNIST-family `download()` (MNIST, FashionMNIST, KMNIST; those that download otherwise, EMNIST
    and QMNIST, fail as offline) with nothing to download from: the IDX files it would extract are written into the
    dataset's raw folder first (try_run/data.py), so it finds them there and the dataset loads them as its own."""
    download = module.MNIST.download

    def standing_in(self):
        if not self._check_exists():
            from pathlib import Path

            name = type(self).__name__
            files = [os.path.splitext(os.path.basename(resource[0]))[0] for resource in self.resources]
            _torchvision_stand_in(
                name, lambda: _tool_module("data").mnist_files(Path(self.raw_folder), files, name)
            )
        return download(self)

    module.MNIST.download = standing_in


def _after_torchvision_cifar(module) -> None:
    """torchvision's CIFAR-10 / CIFAR-100 `download()` with nothing to download from: the batches it would extract
    are written into its folder first (try_run/data.py). The dataset checks each file's MD5 against the real
    archive's: the files the try wrote are its own, so that check passes for them (and only them)."""
    download, check_integrity = module.CIFAR10.download, module.check_integrity
    written: set[str] = set()

    def standing_in(self):
        if not self._check_integrity():
            from pathlib import Path

            name, folder = type(self).__name__, Path(self.root) / self.base_folder

            def write() -> dict:
                report = _tool_module("data").cifar_files(
                    folder,
                    [entry[0] for entry in self.train_list],
                    [entry[0] for entry in self.test_list],
                    self.meta,
                    name,
                )
                files = [entry[0] for entry in self.train_list + self.test_list] + [self.meta["filename"]]
                written.update(os.path.realpath(folder / file) for file in files)
                return report

            _torchvision_stand_in(name, write)
        return download(self)

    def check_integrity_of_stand_ins(fpath, md5=None):
        if os.path.realpath(fpath) in written and os.path.isfile(fpath):
            return True
        return check_integrity(fpath, md5)

    module.CIFAR10.download = standing_in
    module.check_integrity = check_integrity_of_stand_ins


def _after_evaluate_loading(module) -> None:
    """`evaluate.load(NAME)` of a metric the try stands in for (try_run/metrics.py) that the runner did not write
    (a script it did not read loads it): its stand-in is written into evaluate's modules cache before evaluate looks
    for it there. Other names are left to evaluate, which fails offline as it does without the try."""
    import functools

    load = module.load

    @functools.wraps(load)
    def loading(path, *args, **kwargs):
        if isinstance(path, str) and not os.path.exists(path):
            # (a stand-in that cannot be written: evaluate then says the metric is not found, as offline)
            with contextlib.suppress(Exception):
                _serve_metric(path)
        return load(path, *args, **kwargs)

    module.load = loading


def _serve_metric(name: str) -> None:
    from pathlib import Path

    from evaluate import config as evaluate_config

    metrics = _tool_module("metrics")
    if name not in metrics.SERVED:
        return
    (served,) = metrics.serve([name], Path(evaluate_config.HF_MODULES_CACHE))
    if name not in {metric["name"] for metric in STATE.metrics}:
        STATE.metrics.append({**served, "served": "when the code loaded it"})
        STATE.write()


def _tool_module(name: str):
    """A module of try_run/ (data.py, metrics.py: the try's stand-ins), loaded by its path: the tool's packages are
    not on the path of the environment a try runs in."""
    qualified = f"_neuron_migrate_try_{name}"
    if qualified not in sys.modules:
        location = os.path.join(os.path.dirname(_HERE), f"{name}.py")
        spec = importlib.util.spec_from_file_location(qualified, location)
        module = importlib.util.module_from_spec(spec)
        sys.modules[qualified] = module  # (dataclasses look their module up while the file runs)
        spec.loader.exec_module(module)
    return sys.modules[qualified]


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
                "dtype": str(getattr(model, "dtype", "")).replace("torch.", "") or None,
            }
        )
        return model

    pretrained.from_pretrained = classmethod(recording_from_pretrained)


# The account a try answers `whoami()` with and logs in as: the try has no credentials (HF_TOKEN is a placeholder).
STAND_IN_USER = "neuron-migrate-try"
# The id of every commit a try "makes": none exists.
NO_COMMIT = "0" * 40


class _WrittenFile(NamedTuple):
    size: int
    content: (
        bytes | None
    )  # kept up to KEPT_BYTES (cards, configs), for the flows that read back what they wrote


# What this process wrote to the Hub, as the Hub would now hold it: (repo_type, repo_id) -> {path: file}. Reads
# of these repositories answer from it, so a write flow that reads back what it wrote (datasets' push_to_hub
# lists the files it replaces and reads the card it extends) sees this run's writes.
_WRITTEN: dict[tuple[str, str], dict[str, _WrittenFile]] = {}
KEPT_BYTES = 1_000_000
# The stand-in answer to the one request a simple write (delete_repo, update_repo_settings, ...) makes, while
# the real method runs its own checks of the arguments (_answered).
_ANSWERING: contextvars.ContextVar = contextvars.ContextVar("answering_hub_writes", default=None)


def _after_hf_api(module) -> None:
    """The Hub's write calls do their local part (a commit's files are read and hashed, a README's metadata is
    parsed, a repo id, a repo type, a setting is validated) and are then recorded in the report, not sent: the
    try has no network and no credentials. The uploads of Transformers, Diffusers, sentence-transformers,
    datasets and the Trainer all come down to these HfApi methods. `whoami` answers with the stand-in account;
    reads of a repository this run wrote answer from what it wrote (_WRITTEN). The module's own functions
    (`huggingface_hub.upload_folder`, `whoami`) are bound methods of its shared HfApi, bound again to the
    methods replaced here."""
    api = module.HfApi
    session = module.get_session
    for method in [
        *_recorded_writes(module),
        *_answered_writes(module, session),
        *_answered_reads(module, session),
    ]:
        setattr(api, method.__name__, method)
        if hasattr(module, method.__name__):  # huggingface_hub.create_repo: a method of the module's HfApi
            setattr(module, method.__name__, getattr(module.api, method.__name__))
    module.get_session = lambda: _ANSWERING.get() or session()
    # upload_folder streams through the Xet pipeline where hf_xet is installed, which uploads before it
    # commits; without it, it gathers the folder's files and makes one create_commit, recorded above.
    module.is_xet_available = lambda: False


def _repo_url(module, endpoint: str, repo_id: str, repo_type: str | None) -> str:
    return f"{endpoint}/{module.constants.REPO_TYPES_URL_PREFIXES.get(repo_type, '')}{repo_id}"


def _recorded_writes(module) -> list:
    """The writes that create: a repository, a commit (with what it adds, copies and deletes), a branch, a tag."""
    api = module.HfApi
    checked = module.validate_hf_hub_args  # the repo-id checks the real methods make

    @checked
    def create_repo(self, repo_id, *, private=None, visibility=None, repo_type=None, **options):
        hidden = " (private)" if private or visibility == "private" else ""
        _record_upload(repo_id, repo_type, f"create the repository{hidden}")
        _WRITTEN.setdefault((repo_type or "model", repo_id), {})
        return module.RepoUrl(_repo_url(module, self.endpoint, repo_id, repo_type), endpoint=self.endpoint)

    @module.future_compatible
    @checked
    def create_commit(
        self, repo_id, operations, *, commit_message, repo_type=None, run_as_future=False, **options
    ):
        if not commit_message:  # as the real call refuses it
            raise ValueError("`commit_message` can't be empty, please pass a value.")
        from huggingface_hub import CommitOperationAdd

        operations = list(operations)
        additions = [op for op in operations if isinstance(op, CommitOperationAdd)]
        readme = next((op for op in additions if op.path_in_repo == "README.md"), None)
        if readme is not None:
            with readme.as_file() as file:
                self._validate_yaml(file.read().decode(), repo_type=repo_type)
        # Each addition read its file and hashed it when it was made (CommitOperationAdd.upload_info).
        size = sum(op.upload_info.size for op in additions)
        branch = f" on {options['revision']}" if options.get("revision") else ""
        proposed = " as a pull request" if options.get("create_pr") else ""
        what = f"commit {commit_message!r}{branch}{proposed}: {len(additions)} file(s), {_bytes(size)}"
        if len(operations) > len(additions):
            what += f", {len(operations) - len(additions)} deletion(s) or copies"
        _record_upload(repo_id, repo_type, what)
        _commit_written(_WRITTEN.setdefault((repo_type or "model", repo_id), {}), operations)
        return module.CommitInfo(
            commit_url=f"{_repo_url(module, self.endpoint, repo_id, repo_type)}/commit/{NO_COMMIT}",
            commit_message=commit_message,
            commit_description=options.get("commit_description") or "",
            oid=NO_COMMIT,
        )

    @checked
    def preupload_lfs_files(self, repo_id, additions, *, repo_type=None, **options):
        """Sends a commit's large files ahead of it: nothing to send; the commit that publishes them records
        them (each addition read and hashed its file when it was made)."""
        if repo_type not in module.constants.REPO_TYPES:  # as the real call refuses it
            raise ValueError(f"Invalid repo type, must be one of {module.constants.REPO_TYPES}")
        for addition in additions:
            addition._is_uploaded = True  # as the real call marks them

    @checked
    def create_branch(self, repo_id, *, branch, repo_type=None, **options):
        _record_upload(repo_id, repo_type, f"create the branch {branch}")

    @checked
    def create_tag(self, repo_id, *, tag, repo_type=None, **options):
        _record_upload(repo_id, repo_type, f"create the tag {tag}")

    def _validate_yaml(self, content, *, repo_type=None, token=None):
        """The card's metadata, parsed here as the Hub would (a malformed block raises ValueError)."""
        from huggingface_hub.repocard import RepoCard

        RepoCard(content, ignore_metadata_errors=False)

    def run_as_future(self, fn, *args, **kwargs):
        """Runs the call in a thread, as the real one does, with the user's frame that asked for it (no longer on
        that thread's stack) for its record."""
        context = contextvars.copy_context()
        context.run(_UPLOAD_CALLER.set, _user_frame())
        return submit(self, context.run, fn, *args, **kwargs)

    submit = api.run_as_future
    return [
        create_repo,
        create_commit,
        preupload_lfs_files,
        create_branch,
        create_tag,
        _validate_yaml,
        run_as_future,
    ]


def _commit_written(files: dict[str, _WrittenFile], operations: list) -> None:
    """A commit's operations applied to the files of a repository this run wrote."""
    from huggingface_hub import CommitOperationAdd, CommitOperationCopy, CommitOperationDelete

    for op in operations:
        if isinstance(op, CommitOperationAdd):
            files[op.path_in_repo] = _written_file(op)
        elif isinstance(op, CommitOperationCopy):
            files[op.path_in_repo] = files.get(op.src_path_in_repo, _WrittenFile(0, None))
        elif isinstance(op, CommitOperationDelete):
            folder = op.path_in_repo.rstrip("/") + "/"
            for path in [p for p in files if p == op.path_in_repo or op.is_folder and p.startswith(folder)]:
                del files[path]


def _written_file(addition) -> _WrittenFile:
    """A committed file, with its content where it is small and still at hand (a file sent ahead by
    preupload_lfs_files may be gone by its commit, as datasets deletes its parquet shards)."""
    size = addition.upload_info.size
    if addition._is_uploaded or size > KEPT_BYTES:
        return _WrittenFile(size, None)
    with addition.as_file() as file:
        return _WrittenFile(size, file.read())


def _answered_writes(module, session) -> list:
    """The writes that make one request to the Hub (delete a repository, a branch or a tag; move a repository;
    change its settings; squash its history): the real method runs, with its checks of the arguments, and its request is answered
    by an empty success (_ANSWERING), so nothing is sent."""
    api = module.HfApi
    real = {name: getattr(api, name) for name in ("delete_repo", "move_repo", "update_repo_settings")}
    real.update(
        {name: getattr(api, name) for name in ("delete_branch", "delete_tag", "super_squash_history")}
    )

    def answered(name, *args, **kwargs):
        http = _http_module(session)
        with http.Client(transport=http.MockTransport(lambda request: http.Response(200, json={}))) as client:
            answering = _ANSWERING.set(client)
            try:
                return real[name](*args, **kwargs)
            finally:
                _ANSWERING.reset(answering)

    def delete_repo(self, repo_id, **options):
        answered("delete_repo", self, repo_id, **options)
        _WRITTEN.pop((options.get("repo_type") or "model", repo_id), None)
        _record_upload(repo_id, options.get("repo_type"), "delete the repository")

    def move_repo(self, from_id, to_id, **options):
        answered("move_repo", self, from_id, to_id, **options)
        kind = options.get("repo_type") or "model"
        if (kind, from_id) in _WRITTEN:
            _WRITTEN[(kind, to_id)] = _WRITTEN.pop((kind, from_id))
        _record_upload(from_id, options.get("repo_type"), f"move the repository to {to_id}")

    def update_repo_settings(self, repo_id, **options):
        answered("update_repo_settings", self, repo_id, **options)
        settings = [
            f"{name}={options[name]}"
            for name in ("gated", "private", "visibility")
            if options.get(name) is not None
        ]
        _record_upload(repo_id, options.get("repo_type"), f"update the settings: {', '.join(settings)}")

    def delete_branch(self, repo_id, *, branch, **options):
        answered("delete_branch", self, repo_id, branch=branch, **options)
        _record_upload(repo_id, options.get("repo_type"), f"delete the branch {branch}")

    def delete_tag(self, repo_id, *, tag, **options):
        answered("delete_tag", self, repo_id, tag=tag, **options)
        _record_upload(repo_id, options.get("repo_type"), f"delete the tag {tag}")

    def super_squash_history(self, repo_id, **options):
        answered("super_squash_history", self, repo_id, **options)
        branch = f" of {options['branch']}" if options.get("branch") else ""
        _record_upload(repo_id, options.get("repo_type"), f"squash the history{branch} into one commit")

    return [delete_repo, move_repo, update_repo_settings, delete_branch, delete_tag, super_squash_history]


def _answered_reads(module, session) -> list:
    """whoami, with the stand-in account; the reads of a repository this run wrote (its info, its files), with
    what it wrote. A repository it did not write is read as before (offline: OfflineModeIsEnabled), but for
    repo_info (and repo_exists, which asks it), what write flows ask before they create a repository."""
    api = module.HfApi
    real = {name: getattr(api, name) for name in ("model_info", "dataset_info", "space_info")}
    real.update({name: getattr(api, name) for name in ("list_repo_tree", "get_paths_info", "file_exists")})
    from huggingface_hub.errors import OfflineModeIsEnabled, RemoteEntryNotFoundError, RepositoryNotFoundError

    class NotWritten(RepositoryNotFoundError, OfflineModeIsEnabled):
        """Not found (datasets' push_to_hub then creates the repository; repo_exists says False) and not
        reachable (readers that fall back to their cache offline still do)."""

    def _inner_whoami(self, token):
        """The Hub's answer to whoami-v2 for the stand-in account (the real whoami resolves the token first:
        no token at all still fails as it does)."""
        _record_account("whoami")
        return {
            "type": "user",
            "name": STAND_IN_USER,
            "fullname": STAND_IN_USER,
            "orgs": [],
            "auth": {"type": "access_token", "accessToken": {"displayName": "try", "role": "write"}},
        }

    def info(kind: str, info_class):
        def repo_info_of_kind(self, repo_id, **options):
            files = _WRITTEN.get((kind, repo_id))
            if files is None:
                return real[f"{kind}_info"](self, repo_id, **options)
            siblings = [{"rfilename": path, "size": file.size} for path, file in sorted(files.items())]
            return info_class(id=repo_id, sha=NO_COMMIT, siblings=siblings, private=False)

        repo_info_of_kind.__name__ = f"{kind}_info"
        return repo_info_of_kind

    kinds = {"model": module.ModelInfo, "dataset": module.DatasetInfo, "space": module.SpaceInfo}
    written_info = {kind: info(kind, info_class) for kind, info_class in kinds.items()}

    def not_found(error_class, message: str, url: str):
        http = _http_module(session)
        return error_class(message, response=http.Response(404, request=http.Request("GET", url)))

    def repo_info(self, repo_id, *, repo_type=None, **options):
        kind = repo_type or "model"
        if (kind, repo_id) in _WRITTEN:
            return written_info[kind](self, repo_id)
        url = _repo_url(module, self.endpoint, repo_id, repo_type)
        raise not_found(
            NotWritten, f"{kind} {repo_id}: not written by this run, and a try does not reach the Hub", url
        )

    def list_repo_tree(self, repo_id, path_in_repo=None, *, recursive=False, repo_type=None, **options):
        files = _WRITTEN.get((repo_type or "model", repo_id))
        if files is None:
            return real["list_repo_tree"](
                self, repo_id, path_in_repo, recursive=recursive, repo_type=repo_type, **options
            )
        under = (path_in_repo or "").strip("/")
        if under and not any(path.startswith(under + "/") for path in files):  # as the Hub answers: 404
            url = f"{_repo_url(module, self.endpoint, repo_id, repo_type)}/tree/main/{under}"
            raise not_found(
                RemoteEntryNotFoundError, f"{repo_id}: no folder {under} in what this run wrote", url
            )
        return _written_tree(module, files, under, recursive)

    def get_paths_info(self, repo_id, paths, *, repo_type=None, **options):
        files = _WRITTEN.get((repo_type or "model", repo_id))
        if files is None:
            return real["get_paths_info"](self, repo_id, paths, repo_type=repo_type, **options)
        asked = {paths} if isinstance(paths, str) else set(paths)
        return [entry for entry in _written_tree(module, files, "", True) if entry.path in asked]

    def file_exists(self, repo_id, filename, *, repo_type=None, **options):
        files = _WRITTEN.get((repo_type or "model", repo_id))
        if files is None:
            return real["file_exists"](self, repo_id, filename, repo_type=repo_type, **options)
        return filename in files

    return [_inner_whoami, repo_info, *written_info.values(), list_repo_tree, get_paths_info, file_exists]


def _written_tree(module, files: dict[str, int], under: str, recursive: bool):
    """The files and folders of a repository this run wrote under the folder `under` ("": its root), as the Hub
    lists them."""
    folders = {"/".join(path.split("/")[:depth]) for path in files for depth in range(1, path.count("/") + 1)}
    prefix = under + "/" if under else ""
    for path in sorted(set(files) | folders):
        rest = path[len(prefix) :]
        if path.startswith(prefix) and rest and (recursive or "/" not in rest):
            if path in files:
                yield module.RepoFile(path=path, size=files[path].size, oid=NO_COMMIT)
            else:
                yield module.RepoFolder(path=path, oid=NO_COMMIT)


def _after_hf_file_system(module) -> None:
    """A file of a repository this run wrote, opened for reading through HfFileSystem (datasets' push_to_hub reads
    the card a previous push wrote to extend it): its content as the run committed it."""
    open_file = module.HfFileSystem._open

    def reading_written(self, path, mode="rb", block_size=None, revision=None, **kwargs):
        if "r" in mode:
            resolved = self.resolve_path(path, revision=revision)
            files = _WRITTEN.get((resolved.repo_type, getattr(resolved, "repo_id", None)), {})
            written = files.get(resolved.path_in_repo)
            if written is not None and written.content is not None:
                import io

                return io.BytesIO(written.content)
        return open_file(self, path, mode, block_size, revision, **kwargs)

    module.HfFileSystem._open = reading_written


def _http_module(session):
    """The HTTP library huggingface_hub's session is made with (httpx, or its fork httpx2)."""
    return _package_of(type(session()).__module__)


def _package_of(module_name: str):
    """The imported top-level package of a module (httpx for httpx._transports.default)."""
    return sys.modules[module_name.split(".")[0]]


def _after_login(module) -> None:
    """`login(token=...)` checks the token as the real call does (an organization's token is refused; whoami
    answers with the stand-in account) and is recorded; no token is stored anywhere (no token file, no git
    credential: the try's token is a placeholder). An interactive login (notebook_login, interpreter_login,
    login() without a token) has nobody to answer it: it logs in with the try's token. logout deletes nothing."""
    module._save_token = lambda **stored: None
    module._set_active_token = lambda token_name, add_to_git_credential: _record_account("log in")

    def interactive_login(*, skip_if_logged_in=True):
        module._validate_and_save_token(module.get_token(), add_to_git_credential=False)

    module.notebook_login = module.interpreter_login = interactive_login
    module.logout = lambda token_name=None: _record_account("log out")


def _record_account(what: str) -> None:
    STATE.hub_account.append(
        {"what": what, "name": STAND_IN_USER, "user": _UPLOAD_CALLER.get() or _user_frame()}
    )
    STATE.write()


# The user's frame that asked for an upload run as a future (Trainer's pushes at each save).
_UPLOAD_CALLER: contextvars.ContextVar[dict | None] = contextvars.ContextVar("upload_caller", default=None)


# A URL of an image (the photo of a model card's example): served with a stand-in image, as the network is not
# there; any other URL fails as it would offline.
IMAGE_SUFFIXES = {
    ".jpg": "JPEG",
    ".jpeg": "JPEG",
    ".png": "PNG",
    ".webp": "WEBP",
    ".bmp": "BMP",
    ".gif": "GIF",
}


def _stand_in_image(url: str) -> bytes | None:
    """A 640 x 480 picture in the format the URL names (a gradient: deterministic, every channel varying), and
    the URL recorded; None for a URL that names no image, or without Pillow."""
    path = url.split("?", 1)[0].split("#", 1)[0].lower()
    kind = next((kind for suffix, kind in IMAGE_SUFFIXES.items() if path.endswith(suffix)), None)
    if kind is None:
        return None
    try:
        from PIL import Image
    except ImportError:
        return None
    import io

    image = Image.linear_gradient("L").resize((640, 480))
    image = Image.merge(
        "RGB", (image, image.rotate(90).resize((640, 480)), image.transpose(Image.FLIP_LEFT_RIGHT))
    )
    out = io.BytesIO()
    image.save(out, format=kind)
    user = _user_frame()
    STATE.images.append({"url": url, "user": user})
    return out.getvalue()


def _after_requests(module) -> None:
    send = module.HTTPAdapter.send

    def serving(self, request, *args, **kwargs):
        data = _stand_in_image(request.url) if request.method == "GET" else None
        if data is None:
            return send(self, request, *args, **kwargs)
        import io

        import requests

        response = requests.models.Response()
        response.status_code, response.reason, response.url, response.request = (
            200,
            "OK",
            request.url,
            request,
        )
        response.headers["Content-Type"] = "image/" + request.url.rsplit(".", 1)[-1].split("?")[0].lower()
        response.raw = io.BytesIO(data)
        return response

    module.HTTPAdapter.send = serving


def _after_httpx(module) -> None:
    handle = module.HTTPTransport.handle_request

    def serving(self, request):
        data = _stand_in_image(str(request.url)) if request.method == "GET" else None
        if data is None:
            return handle(self, request)
        return _package_of(module.__name__).Response(200, content=data, request=request)

    module.HTTPTransport.handle_request = serving


def _user_frame() -> dict | None:
    return STATE.nearest_user_frame(traceback.extract_stack()[:-1])


def _bytes(size: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


def _record_upload(repo_id: str, repo_type: str | None, what: str) -> None:
    user = _UPLOAD_CALLER.get() or _user_frame()
    STATE.uploads.append({"repo_id": repo_id, "repo_type": repo_type or "model", "what": what, "user": user})
    STATE.write()


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
    fitted, left = dict.fromkeys(sizes, 1), world
    for name, size in sizes.items():  # every dimension the code asks for stays real where the processes allow
        step = next((d for d in range(2, size + 1) if size % d == 0 and left % d == 0), 1)
        fitted[name], left = step, left // step
    for name, size in sizes.items():  # then the first dimensions take what is left
        step = next((d for d in range(left, 1, -1) if left % d == 0 and fitted[name] * d <= size), 1)
        fitted[name], left = fitted[name] * step, left // step
    for name, size in sizes.items():
        if fitted[name] != size:
            setattr(config, name, fitted[name])
            STATE.launcher_capped.append(f"DistributedConfig {name} {size} -> {fitted[name]}")
    if config.ep_size is not None and config.ep_size > (config.tp_size or 1) * (config.fsdp_size or 1):
        STATE.launcher_capped.append(f"DistributedConfig ep_size {config.ep_size} -> {config.tp_size or 1}")
        config.ep_size = config.tp_size or 1


# -- bench: timings of the script at its real size -------------------------------------------------------
class _Bench:
    """What `neuron-migrate bench` measures in a process. Each timed region ends with the device synchronized
    (torch.accelerator, which covers cuda and neuron; nothing to wait for on the CPU): an optimizer step ends
    at the optimizer's post-step hook, a request at the return of generate(). The time the hooks themselves
    take is measured too (`overhead_seconds`)."""

    def __init__(self, config: dict) -> None:
        self.requests_cap = config["requests"]
        self.step_ends: list[float] = []  # perf_counter at the end of each optimizer step, synchronized
        self.first_batch: float | None = None  # the first DataLoader batch: the first step's start
        self.batches: list[dict] = []  # per DataLoader batch: the step it fed, samples, tokens, real tokens
        self.requests: list[dict] = []  # per generate() call
        self.overhead = 0.0
        self.torch = None

    def start(self, torch) -> None:
        self.torch = torch
        self._wrap_dataloader(torch)

    def synchronize(self) -> None:
        accelerator = self.torch.accelerator
        if accelerator.is_available():
            accelerator.synchronize()

    def current_units(self) -> dict:
        """The optimizer step and the generate() call under way (1-based)."""
        return {"step": len(self.step_ends) + 1, "request": len(self.requests) + 1}

    def step_ended(self) -> None:
        self.synchronize()
        now = time.perf_counter()
        self.step_ends.append(now)
        self.overhead += time.perf_counter() - now

    def _wrap_dataloader(self, torch) -> None:
        """Counts what each batch the script's DataLoaders yield holds, where it is still on the host (no
        device work): samples, tokens (input_ids, or a 2-D integer tensor) and the tokens that are not padding
        (attention_mask)."""
        iterator = torch.utils.data.dataloader._BaseDataLoaderIter
        following = iterator.__next__
        bench = self

        def counting_next(self):
            batch = following(self)
            started = time.perf_counter()
            if bench.first_batch is None:
                bench.first_batch = started
            bench.batches.append({"step": len(bench.step_ends) + 1, **_batch_size(torch, batch)})
            bench.overhead += time.perf_counter() - started
            return batch

        iterator.__next__ = counting_next

    def time_generate(self, mixin, module) -> None:
        """Times each generate() call (a request): the first token when the first logits processor runs (the
        prefill's forward has given its logits), the last when generate() returns."""
        from transformers.generation.logits_process import LogitsProcessor

        generate = mixin.generate
        bench = self

        class FirstToken(LogitsProcessor):
            def __init__(self):
                self.at = None

            def __call__(self, input_ids, scores):
                if self.at is None:
                    bench.synchronize()
                    self.at = time.perf_counter()
                return scores

        def timed_generate(self, *args, **kwargs):
            prompt = kwargs.get("input_ids", args[0] if args else None)
            first = FirstToken()
            processors = kwargs.get("logits_processor") or []
            kwargs["logits_processor"] = module.LogitsProcessorList([*processors, first])
            bench.synchronize()
            started = time.perf_counter()
            output = generate(self, *args, **kwargs)
            bench.synchronize()
            ended = time.perf_counter()
            sequences = getattr(output, "sequences", output)
            request = {"seconds": ended - started, "first_token_seconds": None, "new_tokens": None}
            if first.at is not None:
                request["first_token_seconds"] = first.at - started
            if isinstance(sequences, bench.torch.Tensor) and isinstance(prompt, bench.torch.Tensor):
                decoder_only = not getattr(getattr(self, "config", None), "is_encoder_decoder", False)
                request["batch"] = int(sequences.shape[0])
                request["prompt_tokens"] = int(prompt.shape[-1])
                request["new_tokens"] = int(sequences.shape[-1] - (prompt.shape[-1] if decoder_only else 1))
            bench.requests.append(request)
            STATE.generate_calls += 1
            bench.overhead += time.perf_counter() - ended
            if len(bench.requests) >= bench.requests_cap:
                STATE.stopped_at_cap = True
                raise SystemExit(0)
            return output

        mixin.generate = timed_generate

    def peak_memory(self) -> dict:
        """The device's peak allocated bytes (torch.accelerator's, which reads torch.cuda's or torch.neuron's
        allocator), or on the CPU the process's peak resident memory."""
        torch = self.torch
        if torch is not None and torch.accelerator.is_available():
            device = torch.accelerator.current_accelerator()
            return {"bytes": int(torch.accelerator.max_memory_allocated()), "of": f"{device.type} allocated"}
        import resource

        return {"bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "of": "host peak RSS"}

    def report(self) -> dict:
        return {
            "first_batch": self.first_batch,
            "step_ends": self.step_ends,
            "batches": self.batches,
            "requests": self.requests,
            "overhead_seconds": self.overhead,
            "peak_memory": self.peak_memory(),
            "device_compile": _device_compile_metrics(),
        }


def _batch_size(torch, batch) -> dict:
    """Samples, tokens and real (non-padding) tokens of one batch as a DataLoader yields it."""
    if isinstance(batch, dict) or hasattr(batch, "keys"):
        ids, mask = batch.get("input_ids"), batch.get("attention_mask")
        first = (
            ids
            if ids is not None
            else next((value for value in batch.values() if isinstance(value, torch.Tensor)), None)
        )
    elif isinstance(batch, (list, tuple)):
        first = next((value for value in batch if isinstance(value, torch.Tensor)), None)
        ids = first if first is not None and first.ndim == 2 and not first.is_floating_point() else None
        mask = None
    else:
        first = batch if isinstance(batch, torch.Tensor) else None
        ids, mask = None, None
    size = {"samples": int(first.shape[0]) if first is not None and first.ndim else None}
    if isinstance(ids, torch.Tensor):
        size["tokens"] = int(ids.numel())
        size["real_tokens"] = int(mask.sum()) if isinstance(mask, torch.Tensor) else size["tokens"]
    return size


def _device_compile_metrics() -> list[dict]:
    """The neuron backend's own record of each graph it compiled (torch.neuron.get_dynamo_metrics(), on a
    trn2 as on the stand-in), as plain fields."""
    neuron = getattr(sys.modules.get("torch"), "neuron", None)
    metrics = getattr(neuron, "get_dynamo_metrics", None)
    if metrics is None:
        return []
    try:
        return [
            {name: value for name, value in vars(entry).items() if isinstance(value, (int, float, str))}
            for entry in metrics()
        ]
    except Exception:  # metrics of a backend version whose records are not plain objects: none read
        return []


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
        "module": kind.__module__,  # botocore.exceptions: a call that reached for AWS
        # start and end: a long message's end often names the cause (a list of types ending in DeviceMesh)
        "message": message if len(message) <= 2000 else f"{message[:1000]} ... {message[-1000:]}",
        "chain": chain,
        "user": _syntax_error_location(value) or STATE.nearest_user_frame(frames),
        "raised_at": {"file": frames[-1].filename, "line": frames[-1].lineno} if frames else None,
        "time": time.time(),  # among ranks, the first error is the cause; the others see a closed connection
    }
    STATE.write()


def _syntax_error_location(value) -> dict | None:
    """Where code does not parse (a user's file or cell): a SyntaxError's own file and line, not a frame."""
    if not isinstance(value, SyntaxError) or not value.filename:
        return None
    location = STATE.user_location(value.filename, value.lineno or 1)
    if location is not None:
        location["code"] = (value.text or "").strip()
    return location


def _install(config: dict) -> None:
    global STATE, BENCH
    STATE = _State(config)
    if config.get("bench"):
        BENCH = _Bench(config["bench"])
    argv = list(getattr(sys, "orig_argv", sys.argv))
    if _launcher_kind(argv):
        STATE.role = "launcher"
        if BENCH is None:  # a bench runs the processes the user asked for
            STATE.launcher_capped, asked = _cap_launcher_arguments(sys.argv, config["max_processes"])
            if STATE.launcher_capped and asked:
                os.environ[ASKED_WORLD] = str(asked)  # for its workers
    hooks = {
        "torch": _after_torch,
        "torchvision.extension": _after_torchvision_extension,
        "transformers.trainer": _after_trainer,
        "transformers.generation.utils": _after_generation,
        "transformers.modeling_utils": _after_modeling,
    }
    if BENCH is None:  # a bench runs the pipelines and parallel layout as written
        hooks["diffusers.pipelines.pipeline_utils"] = _after_diffusion_pipeline
        hooks["transformers.distributed.configuration_utils"] = _after_distributed_config
        hooks["huggingface_hub.hf_api"] = _after_hf_api
        hooks["huggingface_hub._login"] = _after_login
        hooks["huggingface_hub.hf_file_system"] = _after_hf_file_system
        hooks["huggingface_hub._snapshot_download"] = lambda module: _serve_local_dir(
            module, "snapshot_download"
        )
        hooks["huggingface_hub.file_download"] = lambda module: _serve_local_dir(module, "hf_hub_download")
        if config.get("datasets"):
            hooks["datasets.load"] = _after_datasets_load
        hooks["evaluate.loading"] = _after_evaluate_loading
        hooks["torchvision.datasets.mnist"] = _after_torchvision_mnist
        hooks["torchvision.datasets.cifar"] = _after_torchvision_cifar
        hooks["torchvision.models._api"] = _after_torchvision_weights
        hooks["requests.adapters"] = _after_requests
        # httpx2: the fork huggingface_hub (and Transformers' load_image) use
        for httpx in ("httpx", "httpx2"):
            hooks[f"{httpx}._transports.default"] = _after_httpx
    sys.meta_path.insert(0, _AfterImport(hooks))
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
        show_syntax_error = shell_class.showsyntaxerror

        def recording_showsyntaxerror(self, *args, **kwargs):  # a cell that does not parse
            kind, value, tb = sys.exc_info()
            if value is not None:
                _record_exception(kind, value, tb)
            return show_syntax_error(self, *args, **kwargs)

        shell_class.showsyntaxerror = recording_showsyntaxerror
        _skip_foreign_magics(shell_class)

    sys.meta_path.insert(0, _AfterImport({"IPython.core.interactiveshell": after_interactiveshell}))


def _skip_foreign_magics(shell_class) -> None:
    """A magic IPython does not have (`%additional_python_modules`, `%%configure`: an AWS Glue or Spark kernel's
    session set-up) is recorded as set-up not run and the cell goes on, where IPython would stop the notebook
    with a UsageError. IPython decides what it has, extensions loaded by the notebook included."""
    run_line, run_cell = shell_class.run_line_magic, shell_class.run_cell_magic

    def known(shell, name: str) -> bool:
        return shell.find_line_magic(name) is not None or shell.find_cell_magic(name) is not None

    def line_magic(self, magic_name, line, *args, **kwargs):
        if known(self, magic_name):
            return run_line(self, magic_name, line, *args, **kwargs)
        STATE.foreign_magics.append(f"%{magic_name} {line}".strip())
        STATE.write()
        return None

    def cell_magic(self, magic_name, line, cell, *args, **kwargs):
        if known(self, magic_name):
            return run_cell(self, magic_name, line, cell, *args, **kwargs)
        STATE.foreign_magics.append(f"%%{magic_name} {line}".strip())
        STATE.write()
        return None

    shell_class.run_line_magic, shell_class.run_cell_magic = line_magic, cell_magic


def _chain_next_sitecustomize() -> None:
    """Runs the sitecustomize this one shadows (a distribution's or a virtualenv's), if there is one."""
    rest = [entry for entry in sys.path if os.path.abspath(entry or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None and os.path.dirname(spec.origin or "") != _HERE:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


STATE: _State | None = None
BENCH: _Bench | None = None
if _CONFIG:
    _install(_CONFIG)
_chain_next_sitecustomize()
