"""NM202 (and NM203-NM205, NM216, each defined in its own module): the keywords of training arguments
(`NeuronTrainingArguments`, `NeuronSFTConfig`, ...) and trainers, decided by one table (`training_args.py`):
renamed, dropped, moved to the model load's `DistributedConfig` (the sharding read here), or left with a TODO;
`logging_dir` moves to the environment. The keywords the migrated arguments need added are
`nm206_added_arguments.py`'s."""

from __future__ import annotations

import json

import libcst as cst
import libcst.matchers as m

from migrator.cst_helpers import (
    argument,
    descendants,
    dotted_name,
    find_keyword,
    is_literal,
    source_code,
    string_value,
    without_args,
)
from migrator.families.training.state import (
    ArgumentsCall,
    Parallelism,
    TrainingFile,
    base_name,
    bound_before,
    reads_moved_field,
    renamed_func,
    trn_config_arg,
    trn_config_source,
    zero_1_setting,
)
from migrator.families.training.targets import (
    HINTS,
    RENAMES,
    TARGET_CALLS,
    TRAINER_KEYWORDS,
    TRIGGERS,
    Target,
)
from migrator.families.training_args import (
    INACTIVE_NOTE,
    KEEP,
    REMOVED_OPTIMIZERS,
    ArgAction,
    without_plain_fields,
)
from migrator.rules import Example, Rule, Severity
from migrator.tp_readiness import resolves, tp_refusal, unresolved_tp
from migrator.transform import TODO_PREFIX, FileContext, Handler

ARGUMENT_RENAMED = Rule(
    "NM202",
    Severity.INFO,
    "A training keyword whose name changed (`warmup_ratio`, `max_seq_length`, `evaluation_strategy`, "
    "`group_by_length`, `tokenizer=` of a trainer, `torch_dtype=` of a training model load, ...)",
    "Renamed (`warmup_steps` takes the ratio as a float in [0, 1), `max_length`, `eval_strategy`, "
    "`processing_class=`, `dtype=`, ...). A removed switch becomes the field that replaced it: "
    '`group_by_length=x` -> `train_sampling_strategy="group_by_length" if x else "random"` (a literal True: '
    '`"group_by_length"`; a literal False goes), `include_inputs_for_metrics` -> `include_for_metrics`.',
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronTrainingArguments

args = NeuronTrainingArguments(output_dir="out", evaluation_strategy="steps", bf16=True)
""",
            after="""\
from transformers import TrainingArguments

args = TrainingArguments(output_dir="out", eval_strategy="steps", bf16=True, torch_compile=True)
""",
        ),
    ),
)
RULES = (ARGUMENT_RENAMED,)


def _switch_value(given: cst.BaseExpression, action: ArgAction) -> cst.BaseExpression:
    """The target's value for a switch given `given`: its on value for a literal True, else `on if given else
    off`, which evaluates `given` once, as the old keyword did."""
    on, off = cst.parse_expression(action.value), cst.parse_expression(action.off)
    if is_literal(given, "True"):
        return on
    if isinstance(given, (cst.IfExp, cst.Lambda, cst.NamedExpr)) and not given.lpar:
        given = given.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.IfExp(test=given, body=on, orelse=off)


class TrainingArguments(Handler):
    CALLS = frozenset({*RENAMES, *TARGET_CALLS})
    HINTS = HINTS
    TRIGGERS = TRIGGERS

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(TrainingFile)
        # Statements to insert before a simple statement (original node) when it is left.
        self.prefixes: dict[cst.SimpleStatementLine, list[cst.BaseStatement]] = {}

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        prefix = self.prefixes.pop(original, None)
        if prefix:
            # The statement keeps the TODOs above it (an earlier run's); blank lines and comments open the block.
            todos = [
                line
                for line in updated.leading_lines
                if line.comment and line.comment.value.startswith(TODO_PREFIX)
            ]
            prefix[0] = prefix[0].with_changes(
                leading_lines=[line for line in updated.leading_lines if line not in todos]
            )
            self.ctx.inserted_before.update(prefix)
            return cst.FlattenSentinel([*prefix, updated.with_changes(leading_lines=todos)])
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if not isinstance(updated, cst.Call) or len(original.args) != len(updated.args):
            return updated  # replaced or restructured by an earlier rule: not ours to pair up
        qualified = self.ctx.qualified(original.func)
        if qualified not in RENAMES and qualified not in TARGET_CALLS:
            return updated
        target = RENAMES.get(qualified) or TARGET_CALLS[qualified]
        if target.arguments is not None:
            return self._arguments_call(original, updated, target, migrated=qualified in RENAMES)
        if target.trainer:
            updated = self._rename_keywords(original, updated, TRAINER_KEYWORDS)
        return renamed_func(self.ctx, original, updated) if qualified in RENAMES else updated

    def _rename_keywords(self, original: cst.Call, updated: cst.Call, renames: dict[str, str]) -> cst.Call:
        args = list(updated.args)
        for index, (before, arg) in enumerate(zip(original.args, updated.args, strict=True)):
            new = renames.get(before.keyword.value) if before.keyword else None
            if new and find_keyword(original, new) is None:
                message = f"`{before.keyword.value}=` -> `{new}=`."
                self.ctx.report(before, ARGUMENT_RENAMED, message, subject=before.keyword.value)
                args[index] = arg.with_changes(keyword=cst.Name(new))
        return updated.with_changes(args=args)

    def _arguments_call(self, original: cst.Call, updated: cst.Call, target: Target, migrated: bool):
        table = target.arguments if migrated else without_plain_fields(target.arguments)
        qualified = self.ctx.qualified(original.func)
        scope = self.file.scope
        manual = []
        for arg in original.args:
            action = table.get(arg.keyword.value) if arg.keyword else None
            if action is not None and self._by_hand(original, arg, action):
                manual.append((arg, action))
        held = (
            self._held_back(original, table, migrated, {arg.keyword.value for arg, _ in manual})
            if manual
            else ""
        )
        for arg, action in manual:
            name = arg.keyword.value
            self.ctx.todo(arg, "NM205", f"`{name}`: {action.note}{held}", subject=name)
        parallelism, reason = (None, None) if manual else self._parallelism(original, table)
        if reason:
            distributed = {name for name, action in table.items() if action.kind == "distributed"}
            why, what = reason
            self.ctx.todo(original, "NM208", why,
                          what + self._held_back(original, table, migrated, distributed))  # fmt: skip
        if manual or reason:
            self.file.kept.add(qualified)
            return updated
        has_star = any(arg.star == "**" for arg in original.args)
        if migrated and not has_star and original in self.file.assigned:
            scope.args_variable = self.file.assigned[original]

        removed: set[cst.Arg] = set()
        args = list(updated.args)
        for index, (before, arg) in enumerate(zip(original.args, updated.args, strict=True)):
            action = table.get(before.keyword.value) if before.keyword else None
            if before.keyword and before.keyword.value == "optim":
                args[index] = self._optimizer(before, arg)
            if action is None or action.kind == "keep":
                continue
            name = before.keyword.value
            if action.kind == "rename":
                if find_keyword(original, action.target) is not None:
                    removed.add(arg)
                    message = f"`{name}` dropped: `{action.target}` is also given."
                    self.ctx.report(before, "NM203", message, subject=name)
                else:
                    args[index] = arg.with_changes(keyword=cst.Name(action.target))
                    message = f"`{name}=` -> `{action.target}=`: {action.note}".rstrip(": ")
                    self.ctx.report(before, ARGUMENT_RENAMED, message, subject=name)
            elif action.kind == "switch" and is_literal(before.value, "False"):
                removed.add(arg)
                message = f"`{name}=False` removed: `{name}` is gone from Transformers 5, and False was its default."
                self.ctx.report(before, "NM203", message, subject=name)
            elif action.kind == "switch":
                value = _switch_value(arg.value, action)
                args[index] = arg.with_changes(keyword=cst.Name(action.target), value=value)
                message = (
                    f"`{name}={source_code(before.value)}` -> `{action.target}={source_code(value)}`: `{name}` is "
                    "gone from Transformers 5."
                )
                self.ctx.report(before, ARGUMENT_RENAMED, message, subject=name)
            elif action.kind == "drop":
                removed.add(arg)
                self.ctx.report(before, "NM203", f"`{name}` removed: {action.note}.", subject=name)
            elif action.kind == "distributed":
                removed.add(arg)
                if parallelism is not None and parallelism.sharded:
                    done = f"`{name}` -> DistributedConfig: {action.note}"
                    self.ctx.report_launch(before, "NM204", done, subject=name)
                else:
                    message = f"`{name}` removed: it does not shard the model, so there is nothing to move."
                    self.ctx.report(before, "NM204", message, subject=name)
            elif action.kind == "environment":
                removed.add(arg)
                self.ctx.report(before, "NM216", subject=name)
                self._set_environment(action.target, arg.value)
            elif action.kind == "manual" and action.removes(source_code(before.value)):
                removed.add(arg)
                message = f"`{name}={action.inactive}` removed: {INACTIVE_NOTE}."
                self.ctx.report(before, "NM203", message, subject=name)
            elif action.kind == "manual":  # a parsed value (`_by_hand` left the others to a person)
                removed.add(arg)
                self._guard_inactive(name, before.value, action)
                self.ctx.report(before, "NM225", subject=name)
        sharded: bool | str = scope.sharded_at_load or (
            parallelism is not None and parallelism.sharded and (parallelism.when_sharded() or True)
        )
        tensor_parallel = (
            parallelism is not None and parallelism.tp is not None and not is_literal(parallelism.tp, "1")
        )
        self.file.arguments_calls[original] = ArgumentsCall(
            table, migrated, has_star, sharded, tensor_parallel
        )
        updated = updated.with_changes(args=without_args(args, removed))
        return renamed_func(self.ctx, original, updated) if migrated else updated

    def _optimizer(self, before: cst.Arg, arg: cst.Arg) -> cst.Arg:
        """`optim="adamw_hf"` -> `optim="adamw_torch"`: a value Transformers removed, by the one that replaced it."""
        value = string_value(before.value)
        if value not in REMOVED_OPTIMIZERS:
            return arg
        replacement, why = REMOVED_OPTIMIZERS[value]
        literal = before.value
        self.ctx.report(
            before, "NM227", f'`optim="{value}"` -> `optim="{replacement}"`: {why}.', subject="optim"
        )
        return arg.with_changes(
            value=literal.with_changes(value=f"{literal.quote}{replacement}{literal.quote}")
        )

    def _trained(self, load: cst.Call, scope: cst.CSTNode) -> bool:
        """Whether a model load is the one the scope's trainer trains (with no trainer here, the one there is):
        not one placed with `device_map` (a CPU preparation load), and the variable the trainer gets."""
        if find_keyword(load, "device_map") is not None:
            return False
        models = []
        for call in descendants(scope, cst.Call):
            target = RENAMES.get(self.ctx.qualified(call.func) or "") or TARGET_CALLS.get(
                self.ctx.qualified(call.func) or ""
            )
            if target is not None and target.trainer:
                given = argument(call, 0, "model")
                models.append(dotted_name(given) if given is not None else None)
        if not models:
            return True
        assigned = m.Assign(
            targets=[m.AssignTarget(m.Name())], value=m.MatchIfTrue(lambda value: value is load)
        )
        names = {a.targets[0].target.value for a in descendants(scope, cst.Assign) if m.matches(a, assigned)}
        return bool(names) and all(model in names for model in models)

    def _held_back(
        self, call: cst.Call, table: dict[str, ArgAction], migrated: bool, decided: set[str]
    ) -> str:
        """For the TODO of a call left to a person: what else in it stays as it was until then (its
        optimum-neuron class, its other arguments that change), and that a second run migrates them."""
        names = [
            f"`{arg.keyword.value}`"
            for arg in call.args
            if arg.keyword
            and arg.keyword.value not in decided
            and table.get(arg.keyword.value, KEEP).kind != "keep"
        ]
        if migrated:
            names.insert(0, f"`{(self.ctx.qualified(call.func) or '').rsplit('.', 1)[-1]}`")
        if not names:
            return ""
        return (
            f"; until then the call stays as it was ({', '.join(names)}): run neuron-migrate again afterwards"
        )

    def _by_hand(self, call: cst.Call, arg: cst.Arg, action: ArgAction) -> bool:
        """The argument is left to a person: a manual field not given its inactive value; a variable where no
        statement can go before the call (only one that is the call itself); a switch whose target the call
        also sets."""
        if action.kind == "environment":
            return not self._line_holds(call)
        if action.kind == "switch":
            return find_keyword(call, action.target) is not None
        if action.kind != "manual" or action.inactive is None:
            return action.kind == "manual"
        # its inactive value goes; a variable too, checked at run time where a statement can go before the call
        parsed = dotted_name(arg.value) is not None and self._line_holds(call)
        return not (action.removes(source_code(arg.value)) or parsed)

    def _argparse_namespace(self, value: cst.BaseExpression, scope: cst.CSTNode) -> bool:
        """`value` reads an attribute of what argparse parsed (`args, _ = parser.parse_known_args()`, the parser an
        `argparse.ArgumentParser`): a flag of the script's own, not a field of training arguments."""
        name = base_name(value)
        assigns = descendants(scope, cst.Assign)
        parsers = {
            target.target.value
            for assign in assigns
            if isinstance(assign.value, cst.Call)
            and self.ctx.qualified(assign.value.func) == "argparse.ArgumentParser"
            for target in assign.targets
            if isinstance(target.target, cst.Name)
        }
        parsed = m.Call(
            func=m.Attribute(
                value=m.Name(m.MatchIfTrue(parsers.__contains__)),
                attr=m.Name("parse_args") | m.Name("parse_known_args"),
            )
        )
        bindings = [
            assign.value
            for assign in assigns
            if name in {n.value for target in assign.targets for n in descendants(target.target, cst.Name)}
        ]
        return name is not None and bool(bindings) and all(m.matches(bound, parsed) for bound in bindings)

    def _line_holds(self, call: cst.Call) -> bool:
        """The call is the whole value of the current simple statement (so a statement can go before it)."""
        line = self.ctx.line
        if line is None or len(line.body) != 1:
            return False
        statement = line.body[0]
        return (
            isinstance(statement, (cst.Assign, cst.AnnAssign, cst.Expr, cst.Return))
            and statement.value is call
        )

    def _guard_inactive(self, name: str, value: cst.BaseExpression, action: ArgAction) -> None:
        """Before the call: stop with the field's note unless the variable holds its inactive value (an
        f-string naming the value it holds)."""
        source = source_code(value)
        note = action.note.replace("{", "{{").replace("}", "}}")
        message = f"{name}={{{source}}}: {note}"
        statement = cst.parse_statement(
            f"if {source} != {action.inactive}:\n    raise ValueError(f{json.dumps(message)})\n"
        )
        self.prefixes.setdefault(self.ctx.line, []).append(statement)

    def _set_environment(self, variable: str, value: cst.BaseExpression) -> None:
        self.ctx.add_import("os")
        text = (
            source_code(value)
            if isinstance(value, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString))
            else f"str({source_code(value)})"
        )
        statement = cst.parse_statement(f'os.environ["{variable}"] = {text}\n')
        self.prefixes.setdefault(self.ctx.line, []).append(statement)

    def _parallelism(
        self, call: cst.Call, table: dict[str, ArgAction]
    ) -> tuple[Parallelism | None, tuple[str, str] | None]:
        """The sharding given by the distributed keywords of an arguments call, and where it goes.

        Returns (parallelism, None) when it can be written on the model load of this scope (registering
        that load), (None, None) when there is nothing to move, (None, (why, what to do)) when it must be
        moved by hand.
        """
        moved = {
            arg.keyword.value: arg.value
            for arg in call.args
            if arg.keyword and table.get(arg.keyword.value, ArgAction("keep")).kind == "distributed"
        }
        if not moved:
            return None, None
        # A setting known at run time only: the load chooses fsdp_size or not on the same value (Parallelism.config).
        parallelism = Parallelism(
            tp=moved.get("tensor_parallel_size"), zero_1=zero_1_setting(moved.get("zero_1"))
        )
        flags = ", ".join(f"`{name}`" for name in moved)
        if not parallelism.sharded:
            return parallelism, None
        file, scope = self.file, self.file.scope
        loads = file.training_loads(scope.node) or file.model_loads(scope.node)
        # Several loads (a preparation load, the trained model): the one the trainer gets, when one is.
        trained = [load for load in loads if self._trained(load, scope.node)]
        if len(loads) == 1 and not trained:
            return None, (
                f"{flags} are not TrainingArguments fields, and the one model from_pretrained of this scope does "
                "not load the model its trainer trains (a preparation load: placed by device_map, or another "
                "model than the trainer's)",
                f"remove them here and pass distributed_config={parallelism.config()} to the from_pretrained "
                "that loads the trained model (from transformers import DistributedConfig)",
            )
        if len(trained) == 1:
            loads = trained
        # A load that came first can only take values that mean the same there: literals, or the degree its
        # lazy_load_for_parallelism block already gave it (NM211: the same expression, read at the load).
        earlier = len(loads) == 1 and loads[0] in file.visited_calls
        at_load = scope.parallelism.tp if scope.parallelism is not None else None
        same_as_load = at_load is not None and source_code(at_load) == source_code(parallelism.tp)

        def settled(value: cst.BaseExpression | bool | None) -> bool:
            """The value means at the load what it means here: a literal; for a load before this call, the
            degree its lazy_load_for_parallelism block gave it or names bound only before the load."""
            if not isinstance(value, cst.BaseExpression) or isinstance(value, cst.Integer):
                return True
            if reads_moved_field(value) and not self._argparse_namespace(value, scope.node):
                return False
            return (
                not earlier
                or (value is parallelism.tp and same_as_load)
                or bound_before(value, loads[0], scope.node)
            )

        movable = settled(parallelism.tp) and settled(parallelism.zero_1)
        traced = (
            len(loads) != 1
            or not file.training_loads(scope.node)
            or trn_config_source(trn_config_arg(loads[0])[1], scope.node) == file.assigned.get(call)
        )
        if len(loads) != 1 or not movable or not traced or (earlier and loads[0] not in scope.loads_left):
            return None, (
                f"{flags} are not TrainingArguments fields and this scope has no single model from_pretrained "
                "that can take them",
                f"remove them here and pass distributed_config={parallelism.config()} to the from_pretrained "
                "that loads the model (from transformers import DistributedConfig)",
            )
        if parallelism.tp is not None and not is_literal(parallelism.tp, "1"):
            degree = int(parallelism.tp.value) if isinstance(parallelism.tp, cst.Integer) else None
            model = _model_reference(loads[0], (scope.node, self.ctx.module))
            if not resolves(model):  # the load checks the plan itself; the models trained are the owner's
                given = argument(loads[0], 0, "pretrained_model_name_or_path")
                self.ctx.todo(
                    call, "NM208", *unresolved_tp(f"`{source_code(given)}`" if given else "The model")
                )
            else:
                refusal = tp_refusal(model, degree)
                if refusal is not None:
                    return None, refusal
        scope.parallelism = parallelism
        (scope.earlier_targets if earlier else scope.load_targets).add(loads[0])
        return parallelism, None


def _model_reference(load: cst.Call, scopes: tuple[cst.CSTNode, ...]) -> str | None:
    """The model id a load reads: a string literal, or a name that the nearest of `scopes` (the load's own,
    then the module) that assigns it assigns one string literal, once."""
    given = argument(load, 0, "pretrained_model_name_or_path")
    if isinstance(given, cst.Name):
        assigned = m.Assign(targets=[m.AssignTarget(m.Name(given.value))])
        for scope in scopes:
            values = [
                assign.value for assign in descendants(scope, cst.Assign) if m.matches(assign, assigned)
            ]
            if values:
                break
        given = values[0] if len(values) == 1 else None
    return string_value(given) if isinstance(given, cst.SimpleString) else None


HANDLER = TrainingArguments
