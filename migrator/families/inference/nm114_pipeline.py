"""NM114: `optimum.neuron.pipeline(task, model=..., export=True, ...)` becomes
`transformers.pipeline(task, model=..., device="neuron")`; a text-generation pipeline gets a static cache."""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from migrator.cst_helpers import descendants, keyword_arg, literal_value, source_code
from migrator.families.inference import tables as t
from migrator.families.inference.loads import (
    Unmapped,
    assemble,
    check_hub_id,
    check_not_compiled,
    compiled,
    one_line,
    shape_dropped,
    split_args,
    string,
)
from migrator.families.inference.state import HINTS, TRIGGERS, InferenceFile, PendingLoad
from migrator.rules import Example, Rule, Severity
from migrator.transform import FileContext, Handler

PIPELINE = Rule(
    "NM114",
    Severity.INFO,
    "`optimum.neuron.pipeline(task, model=..., export=True, ...)`",
    'Rewritten to `transformers.pipeline(task, model=..., device="neuron")` (called through `import transformers`); a text-generation pipeline gets a '
    'static cache (`pipe.model.generation_config.cache_implementation = "static"`, `max_cache_len`).',
    examples=(
        Example(
            before="""\
from optimum.neuron import pipeline

classifier = pipeline("text-classification", model="distilbert-base-uncased-finetuned-sst-2-english", export=True)
""",
            after="""\
import os
import transformers

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

classifier = transformers.pipeline("text-classification", model="distilbert-base-uncased-finetuned-sst-2-english", device="neuron")
""",
        ),
    ),
)
RULES = (PIPELINE,)
_PASSTHROUGH = frozenset(
    {
        "tokenizer",
        "feature_extractor",
        "image_processor",
        "use_fast",
        "token",
        "revision",
        "trust_remote_code",
    }
    | {"batch_size"}
)


class Pipeline(Handler):
    CALLS = t.PIPELINE
    HINTS = HINTS
    TRIGGERS = TRIGGERS

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(InferenceFile)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if self.ctx.qualified(original.func) not in t.PIPELINE:
            return updated
        return self.file.guarded(self._rewrite, original, updated)

    def _rewrite(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        file = self.file
        args = split_args(original, updated, "pipeline()", file.visible_dicts(), positional=("model",))
        task = args.model  # pipeline's first positional argument is the task
        if task is None and "task" in args.keywords:
            task = args.keywords["task"]
        task_name = literal_value(task[1].value) if task else None
        model = args.keywords.get("model")
        if model is None:
            raise Unmapped("NM116", "no model is passed (optimum picks a default)", "pass model= by hand")
        # A model object migrated above is already on its device(s) with its static cache set.
        model_object = source_code(model[1].value) in file.models_in_scope()
        compiled_decoder = False
        if not model_object:
            probe = replace(args, model=model)  # the checks look at the model, not the task
            compiled_decoder = task_name == "text-generation" and compiled(probe)
            if compiled_decoder:  # the model its record names, loaded as compiled (NM106): a model object
                load = file.compiled_decoder_load(
                    model[0].value,
                    one_line([cst.Arg(model[1].value), keyword_arg("device_map", string("neuron"))]),
                )
                args.keywords["model"] = (model[0], model[1].with_changes(value=load))
                model_object = True
                if "tokenizer" not in args.keywords:
                    # optimum's pipeline loaded the tokenizer saved with the compiled model; Transformers' does
                    # not guess it for a model object
                    if descendants(model[1].value, cst.Call):
                        raise Unmapped(
                            "NM116",
                            f"the tokenizer would be loaded from `{source_code(model[1].value)}`, evaluated again",
                            "hold the model id in a variable and run neuron-migrate again",
                        )
                    args.keywords["tokenizer"] = (model[0], keyword_arg("tokenizer", model[1].value))
                    args.order.append("tokenizer")
            else:
                check_not_compiled(probe, "a model")
                check_hub_id(probe)
        settings = self._settings(args)
        if not compiled_decoder:
            _check_settings(settings, task_name, self.ctx.launch(script="generate.py"))
        extra = [] if model_object else [keyword_arg("device", string("neuron"))]
        for name, (old, value) in settings.items():
            if compiled_decoder and name not in _PASSTHROUGH:
                file.ignored_by_compiled_load(old, name)
            elif name in t.DTYPE_ARGS:
                extra.append(keyword_arg("dtype", file.dtype(name, old, cst.Arg(value))))
            elif name == "sequence_length" and task_name == "text-generation":
                file.report(old, "NM102")
            elif name == "sequence_length" or (name == "batch_size" and old.keyword.value == "input_shapes"):
                file.report(old, "NM104", shape_dropped(name, value, file.ctx), subject=name)
            elif name == "batch_size":
                file.report(
                    old,
                    "NM104",
                    "Kept as the pipeline's batch size: feed full batches only "
                    "(a smaller last batch compiles again on neuron).",
                )
            elif name not in _PASSTHROUGH:
                file.report(old, "NM105", subject=name)
        kept = [name for name in args.order if name in _PASSTHROUGH]
        if args.model is None and task is not None:  # task=... keyword: keep it first
            kept.insert(0, "task")
        kept.insert(1 if "task" in kept else 0, "model")
        if task_name == "text-generation" and not model_object:
            if original not in file.assigned_calls:
                raise Unmapped(
                    "NM116",
                    "this text-generation pipeline is not assigned to a name, so its static cache cannot be set",
                    "assign it to a variable and run neuron-migrate again",
                )
            cache_len = settings["sequence_length"][1] if "sequence_length" in settings else None
            if cache_len is None:
                file.report(original, "NM102", t.NO_CACHE_LEN)
            target = source_code(file.assigned_calls[original])
            file.loads[original] = PendingLoad(f"{target}.model.generation_config", cache_len)
        file.report(original, PIPELINE)
        # `transformers.pipeline`, not `pipeline`: the optimum `pipeline` import stays while any call still uses it.
        file.add_import("transformers")
        file.drop_source_import(original.func, self.ctx.qualified(original.func))
        return updated.with_changes(
            func=cst.parse_expression("transformers.pipeline"), args=assemble(args, kept, extra)
        )

    @staticmethod
    def _settings(args) -> dict[str, tuple[cst.Arg, cst.BaseExpression]]:
        """Setting -> (original node, value), `input_shapes` and `compiler_args` dicts spelled out."""
        settings: dict[str, tuple[cst.Arg, cst.BaseExpression]] = {}
        for name in args.order:
            old, new = args.keywords[name]
            if name in ("input_shapes", "compiler_args"):
                if not isinstance(new.value, cst.Dict) or any(
                    not isinstance(element, cst.DictElement)
                    or not isinstance(literal_value(element.key), str)
                    for element in new.value.elements
                ):
                    raise Unmapped("NM116", f"{name} is not a literal dict", "spell its keys out by hand")
                for element in new.value.elements:
                    settings[literal_value(element.key)] = (old, element.value)
            elif name not in ("task", "model"):
                settings[name] = (old, new.value)
        return settings


def _check_settings(settings: dict, task_name, launch: str) -> None:
    """Every setting has a transformers.pipeline equivalent the codemod can write; raises `Unmapped`.
    `launch`: how to start the processes a tensor-parallel model needs (`FileContext.launch`)."""
    unknown = [
        name
        for name in settings
        if name not in _PASSTHROUGH | t.EXPORT_ONLY_ARGS | {"sequence_length"}
        and name not in t.TP_ARGS + t.DTYPE_ARGS
    ]
    if unknown:
        raise Unmapped("NM116", f"no transformers.pipeline equivalent known for {', '.join(unknown)}")
    for name in t.TP_ARGS:
        if name in settings and literal_value(settings[name][1]) != 1:
            raise Unmapped(
                "NM116",
                f"{name}={source_code(settings[name][1])} needs a tensor-parallel model",
                "load it with AutoModelForCausalLM.from_pretrained(id, distributed_config=DistributedConfig("
                f"tp_size=N)) and pass the model object to transformers.pipeline; {launch}",
            )
    if "sequence_length" in settings and task_name is ...:
        raise Unmapped("NM116", "the task is chosen at run time, so sequence_length cannot be mapped")


HANDLER = Pipeline
