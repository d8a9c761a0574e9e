"""Shell rewrites on tree-sitter: what bash reads back from inside strings and heredocs, launch counts,
and the verification that refuses to write a worse script."""

from __future__ import annotations

import shutil
import subprocess
import textwrap

import pytest

from migrator import engine
from migrator.engine import Job, Mode, migrate_python, migrate_shell, process
from migrator.shell import rewrite
from migrator.shell.nm452_optimum_cli import EXPORT_COMMAND
from migrator.shell.rewrite import rewrite_shell
from usercode.shell import problems
from usercode.sources import discover

needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def run_bash(script: str, cwd) -> str:
    return subprocess.run(["bash", "-c", script], cwd=cwd, capture_output=True, text=True, check=True).stdout


@needs_bash
@pytest.mark.parametrize("delimiter", ["EOF", "'EOF'"])
def test_python_heredoc_is_migrated_and_bash_writes_exactly_the_rewrite(tmp_path, delimiter):
    body = 'from optimum.neuron import NeuronModelForCausalLM\n\nmodel = NeuronModelForCausalLM.from_pretrained("llama_neuron/")\n'
    script = f"#!/bin/bash\ncat > generate.py <<{delimiter}\n{body}EOF\npython generate.py\n"
    migrated, findings = migrate_shell(script)
    expected, _ = migrate_python(body, scan=False)  # the leftover scan of the script covers its heredocs
    assert "`" in expected  # the TODO quotes names in backticks: an unquoted heredoc must escape them
    run_bash(migrated.replace("python generate.py", "true"), tmp_path)
    assert (tmp_path / "generate.py").read_text() == expected
    assert "NM106" in {f.code for f in findings}
    assert migrate_shell(migrated)[0] == migrated


@needs_bash
def test_text_inserted_in_a_double_quoted_command_string_reads_back_as_the_shell_rewrite(tmp_path):
    inner = "pip install optimum-neuron datasets && NEURON_FUSE_SOFTMAX=1 ./train.sh"
    script = f'bash -c "{inner}"\n'
    migrated, _ = rewrite_shell(script)
    assert '\\"transformers>=5.23\\"' in migrated
    # bash hands the string to `bash -c` unquoted: it must be the inner command's own rewrite.
    printed = run_bash('bash() { printf "%s" "$2"; }\n' + migrated, tmp_path)
    assert printed == rewrite_shell(inner)[0]


def test_flag_removed_inside_a_heredoc_keeps_the_continuation_of_the_line_above():
    script = textwrap.dedent(
        """\
        cat > run.sh <<EOF
        torchrun run_clm.py \\
          --zero_1 true \\
          --output_dir out
        EOF
        """
    )
    migrated, _ = rewrite_shell(script)
    assert "torchrun run_clm.py \\\n  --output_dir out\nEOF" in migrated
    assert problems(migrated.encode()) == 0


@needs_bash
def test_an_unquoted_heredoc_is_read_as_bash_writes_it_out(tmp_path):
    """`\\\\` before a newline is a continuation once bash has written the body: the flags on the lines below
    belong to the launch, and `--bf16` goes after the last of them, not after the `\\\\`."""
    script = textwrap.dedent(
        """\
        cat > job.sh <<EOF
        #!/bin/bash
        export XLA_USE_BF16=1
        cd \\$HOME
        torchrun --nproc_per_node=2 run_clm.py \\\\
            --zero_1 true \\\\
            --output_dir /tmp/out
        EOF
        """
    )
    migrated, findings = rewrite_shell(script)
    assert {f.code for f in findings} == {"NM461", "NM465", "NM468"}
    run_bash(migrated, tmp_path)
    written = (tmp_path / "job.sh").read_text()
    assert written.endswith(
        "torchrun --nproc_per_node=2 run_clm.py \\\n    --output_dir /tmp/out --bf16 true\n"
    )
    assert "cd $HOME\n" in written
    assert problems(written.encode()) == 0
    assert rewrite_shell(migrated)[0] == migrated


def test_quoted_data_heredoc_is_left_alone():
    script = "cat > notes.txt <<'EOF'\nexport XLA_USE_BF16=1\ntorchrun train.py --zero_1 true\nEOF\n"
    assert rewrite_shell(script) == (script, [])


@pytest.mark.parametrize(
    "script",
    [
        "neuron_parallel_compile torchrun train.py\n",  # compile-only: must not become a training run
        "torchrun train.py\nneuron_parallel_compile torchrun train.py\n",  # the launch does not follow it
        "neuron_parallel_compile torchrun train.py\ntorchrun eval.py\n",  # another launch
        "neuron_parallel_compile torchrun train.py | tee log\ntorchrun train.py\n",  # cannot go alone
    ],
)
def test_compile_run_stays_inert_unless_the_same_launch_follows(script):
    migrated, findings = rewrite_shell(script)
    assert migrated.count("neuron_parallel_compile torchrun train.py") == 1
    assert migrated.count("train.py") == script.count("train.py")
    assert [f.code for f in findings if f.code in ("NM450", "NM451")] == ["NM450"]
    again, again_findings = rewrite_shell(migrated)
    assert again == migrated and [f.code for f in again_findings] == ["NM450"]


def test_wrapper_options_go_with_the_wrapper():
    script = (
        "neuron_parallel_compile --command analyze --num_parallel 4 python x.py --a 1\npython x.py --a 2\n"
    )
    migrated, findings = rewrite_shell(script)
    assert migrated == "export HF_DEACTIVATE_ASYNC_LOAD=1\npython x.py --a 2\n"
    assert [f.code for f in findings] == ["NM451", "NM465"]


def test_assignments_tree_sitter_joins_to_the_next_command_are_separate_statements():
    script = "A=1 NEURON_FUSE_SOFTMAX=1\nNEURON_FUSE_SOFTMAX=1\npython train.py\n"
    migrated, _ = rewrite_shell(script)
    assert migrated == "export HF_DEACTIVATE_ASYNC_LOAD=1\nA=1\npython train.py\n"


def test_write_refuses_output_that_parses_worse(tmp_path, monkeypatch):
    path = tmp_path / "run.sh"
    original = b"#!/bin/bash\nexport NEURON_FUSE_SOFTMAX=1\ntorchrun train.py\n"
    path.write_bytes(original)
    monkeypatch.setattr(engine, "rewrite_shell", lambda text, *_, **__: (text + "if then fi (\n", []))
    (source,) = discover([path])
    result = process(Job(source, Mode.WRITE))
    assert "more syntax error" in result.error
    assert path.read_bytes() == original


def test_overlapping_edits_are_an_error_not_a_corrupt_file(tmp_path, monkeypatch):
    path = tmp_path / "run.sh"
    original = b"export NEURON_FUSE_SOFTMAX=1\n"
    path.write_bytes(original)

    def clash(self):
        self.edits += [rewrite.Edit(0, 10, "a"), rewrite.Edit(5, 15, "b")]
        return self.render(), []

    monkeypatch.setattr(rewrite.ShellRewriter, "run", clash)
    (source,) = discover([path])
    result = process(Job(source, Mode.WRITE))
    assert result.error and "internal error" in result.error
    assert path.read_bytes() == original


def test_what_tree_sitter_cannot_parse_is_left_alone():
    unclosed = (
        "export NEURON_FUSE_SOFTMAX=1\nif [ -n x ]; then\n  torchrun run_clm.py --zero_1 true\n  ( echo\n"
    )
    assert rewrite_shell(unclosed) == (unclosed, [])  # the whole file is one ERROR node: nothing is a guess
    stray = "export NEURON_FUSE_SOFTMAX=1\necho ok )\ntorchrun run_clm.py --zero_1 true\n"
    migrated, findings = rewrite_shell(stray)
    assert (
        "echo ok )\n" in migrated and "NEURON_FUSE_SOFTMAX=1" not in migrated and "--zero_1" not in migrated
    )


def test_branch_on_the_compile_variable_is_not_folded_where_the_file_sets_it():
    script = (
        'if [ "$1" = compile ]; then export NEURON_EXTRACT_GRAPHS_ONLY=1; fi\n'
        'if [ "$NEURON_EXTRACT_GRAPHS_ONLY" = "1" ]; then\n  STEPS=10\nelse\n  STEPS=1000\nfi\n'
    )
    migrated, findings = rewrite_shell(script)
    assert "STEPS=10\n" in migrated and "STEPS=1000\n" in migrated
    assert [f.code for f in findings] == ["NM459", "NM459"]


def test_flags_follow_the_parser_of_the_script_read_from_the_tree(tmp_path):
    (tmp_path / "scripts").mkdir()
    (tmp_path / "train_hf.py").write_text(
        "from dataclasses import dataclass\n"
        "from transformers import HfArgumentParser\n"
        "from optimum.neuron import NeuronTrainingArguments\n\n"
        "@dataclass\nclass DataArguments:\n    max_seq_length: int = 512\n\n"
        "parser = HfArgumentParser((DataArguments, NeuronTrainingArguments))\n"
    )
    (tmp_path / "train_own.py").write_text(
        "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--warmup-ratio', type=float)\n"
    )
    script = (
        "torchrun train_hf.py --max_seq_length 128 --warmup_ratio 0.1 --zero_1 true\n"
        "python train_own.py --warmup_ratio 0.1 --overwrite_output_dir\n"
    )
    # Launched from a sub-directory: the scripts are found one level up.
    migrated, findings = rewrite_shell(script, directory=tmp_path / "scripts")
    assert "torchrun train_hf.py --max_seq_length 128 --warmup_steps 0.1\n" in migrated  # its own field stays
    assert "python train_own.py --warmup_ratio 0.1 --overwrite_output_dir\n" in migrated
    assert sorted(f.code for f in findings) == ["NM461", "NM462", "NM465", "NM466"]
    unknown = next(f for f in findings if f.code == "NM466")
    assert "--overwrite_output_dir" in unknown.message and "builds no TrainingArguments" in unknown.message


def test_bf16_todo_on_a_script_that_builds_its_arguments_in_code_says_so(tmp_path):
    """A notebook's training script may build TrainingArguments in code: --bf16 cannot reach it, and the TODO
    must not claim it builds none."""
    (tmp_path / "train_in_code.py").write_text(
        "from transformers import Trainer, TrainingArguments\n"
        "args = TrainingArguments(output_dir='out', num_train_epochs=3)\n"
    )
    _, findings = rewrite_shell(
        "XLA_USE_BF16=1 torchrun --nproc_per_node=2 train_in_code.py\n", directory=tmp_path
    )
    (precision,) = [f for f in findings if f.code == "NM469"]
    assert "`train_in_code.py`, which builds no TrainingArguments/SFTConfig from its command line:" in (
        precision.message
    )


def test_async_load_prefix_goes_after_the_time_keyword():
    """`VAR=1 time X=1 cmd` runs /usr/bin/time, which execs `X=1` as a program (exit 127): a notebook's
    `!time XLA_USE_BF16=1 torchrun ...` line gets the prefix after `time`."""
    migrated, _ = rewrite_shell(
        "time XLA_USE_BF16=1 torchrun --nproc_per_node=1 bert_train.py\n", inline=True
    )
    assert migrated.endswith(
        "time HF_DEACTIVATE_ASYNC_LOAD=1 XLA_USE_BF16=1 torchrun --nproc_per_node=1 bert_train.py\n"
    )
    if shutil.which("bash"):
        runs = migrated.splitlines()[-1].replace("torchrun", "true")
        assert subprocess.run(["bash", "-c", runs], capture_output=True).returncode == 0


def test_bf16_variable_goes_only_where_every_launch_it_reaches_takes_bf16():
    both = "export XLA_USE_BF16=1\ntorchrun run_clm.py --do_train\npython sft.py --packing True\n"
    migrated, findings = rewrite_shell(both)
    assert "XLA_USE_BF16" not in migrated
    assert "run_clm.py --do_train --bf16\n" in migrated and "sft.py --packing True --bf16 True\n" in migrated
    mixed = "export XLA_USE_BF16=1\ntorchrun run_clm.py --do_train\npython my_loop.py\n"
    migrated, findings = rewrite_shell(mixed)
    assert "export XLA_USE_BF16=1\n" in migrated and "run_clm.py --do_train\n" in migrated
    assert [f.code for f in findings if not f.fixed] == ["NM469"]
    assert rewrite_shell("XLA_USE_BF16=0 torchrun run_clm.py\n")[0] == (
        "HF_DEACTIVATE_ASYNC_LOAD=1 torchrun run_clm.py\n"
    )  # a false value only goes away
    # A prefix on a command that launches nothing (`env` alone lists the environment) keeps it, with a TODO.
    assert [f.code for f in rewrite_shell("XLA_USE_BF16=1 env\n")[1]] == ["NM469"]


def test_renamed_flag_message_has_no_empty_note():
    _, findings = rewrite_shell("torchrun run_clm.py --per_gpu_train_batch_size 8 --zero_1 true\n")
    (renamed,) = [f for f in findings if f.code == "NM462"]
    assert renamed.message == "`--per_gpu_train_batch_size` renamed to `--per_device_train_batch_size`."


@pytest.mark.parametrize(
    ("command", "counted"),
    [
        (
            "--num_cores 24",
            "--num_cores=24 counted the compile target's (inf2 / trn1) NeuronCores, not trn2 "
            "NeuronCores; 24 does not divide the 64 logical NeuronCores of a trn2.48xlarge",
        ),
        (
            "--tensor_parallel_size=2 --instance_type trn1",
            "--tensor_parallel_size=2 counted trn1 NeuronCores, not trn2 NeuronCores",
        ),
    ],
)
def test_export_core_count_is_not_handed_to_tp_size_as_is(command, counted):
    """An inf2/trn1 core count is not a trn2 tensor-parallel degree: NM452 says so, with the count (NM504)."""
    script = f"optimum-cli export neuron --model Qwen/Qwen3-8B --batch_size 1 {command} --sequence_length 4096 out/\n"
    migrated, findings = rewrite_shell(script)
    assert migrated == ""
    (export,) = findings
    assert export.code == "NM452" and export.fixed
    assert f" {counted}: choose DistributedConfig(tp_size=...) for the trn2 / trn3 instance" in export.message
    # Compiled for trn2, the count is of trn2 NeuronCores: nothing to add. Without a core count the rule's own
    # text, which never maps --num_cores straight to tp_size either.
    (trn2,) = rewrite_shell(
        "optimum-cli export neuron --model Qwen/Qwen3-8B --num_cores 4 --instance_type trn2 o/\n"
    )[1]
    assert trn2.message == EXPORT_COMMAND.action
    (plain,) = rewrite_shell("optimum-cli export neuron --model Qwen/Qwen3-8B out/\n")[1]
    assert plain.message == EXPORT_COMMAND.action
    assert "--num_cores/--tensor_parallel_size into" not in plain.message


def test_compile_variable_set_to_zero_is_the_real_run_not_a_compile_step():
    """A Slurm pipeline's training job exports NEURON_EXTRACT_GRAPHS_ONLY=0: its TODO must not call it a
    compile step to delete (that job is the training run), and it stays for the script that reads it."""
    job = "#!/bin/bash\n#SBATCH --nodes=1\nexport NEURON_EXTRACT_GRAPHS_ONLY={value}\nsrun bash finetune.sh\n"
    real, findings = rewrite_shell(job.format(value=0))
    assert "export NEURON_EXTRACT_GRAPHS_ONLY=0\n" in real
    (kept,) = [f for f in findings if f.code == "NM459"]
    assert "selects the real run" in kept.message and "delete this compile step" not in kept.message
    (compile_only,) = [f for f in rewrite_shell(job.format(value=1))[1] if f.code == "NM459"]
    assert "delete this compile step by hand" in compile_only.message


def test_requirements_lines_are_read_as_pip_reads_them():
    from migrator.shell.installs import parse, plan, replaced, stale

    git = parse("git+https://github.com/huggingface/optimum-neuron.git@v0.3.0#egg=optimum-neuron")
    assert git.name == "optimum-neuron" and replaced(git)
    assert replaced(parse("optimum[neuronx]>=1.20")) and not replaced(parse("optimum[onnxruntime]"))
    assert stale(parse("torch-neuronx==2.1.2.2.3.0")) and not stale(parse("torch-neuronx>=2.14"))
    pins = [parse("optimum-neuron[diffusers]"), parse("transformers>=4.40,<6"), parse("trl==0.19.1")]
    result = plan(pins)
    assert [why for owner, why in result.conflicts] == [
        "it excludes `trl>=1.16`, which the migrated code needs"
    ]
    assert result.added == ["torch-neuronx", "peft", "accelerate", "diffusers"]


def test_a_requirements_file_in_a_tree_is_migrated_by_the_cli(tmp_path):
    from click.testing import CliRunner

    from commands.neuron_migrate import main

    (tmp_path / "requirements-train.txt").write_text("optimum-neuron==0.3.0\ndatasets\n")
    (tmp_path / "notes.txt").write_text("optimum-neuron==0.3.0\n")
    result = CliRunner().invoke(main, [str(tmp_path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "requirements-train.txt").read_text() == (
        "--extra-index-url https://pip.repos.neuron.amazonaws.com\n"
        "torch-neuronx\ntransformers>=5.23\ntrl>=1.16\npeft\naccelerate\ndatasets\n"
    )
    assert (tmp_path / "notes.txt").read_text() == "optimum-neuron==0.3.0\n"  # not a requirements file


def test_the_trl_command_line_parses_flags_into_the_config_of_its_subcommand():
    script = "export XLA_USE_BF16=1\ntrl sft --model_name_or_path Qwen/Qwen3-0.6B --max_seq_length 1024 --zero_1 true\n"
    migrated, findings = rewrite_shell(script)
    assert migrated == (
        "export HF_DEACTIVATE_ASYNC_LOAD=1\ntrl sft --model_name_or_path Qwen/Qwen3-0.6B --max_length 1024 --bf16 true\n"
    )
    assert sorted(f.code for f in findings) == ["NM461", "NM462", "NM465", "NM468"]


def test_an_install_keeps_a_package_that_a_python_heredoc_further_down_still_imports():
    from migrator.engine import migrate_python

    script = (
        "pip install optimum-neuron datasets\n"
        "cat > check.py <<EOF\nfrom optimum.neuron.utils import is_neuronx_available\nEOF\n"
    )
    migrated, findings = rewrite_shell(script, migrate_python)
    assert "pip install optimum-neuron datasets\n" in migrated
    assert "NM473" in {f.code for f in findings} and "NM460" not in {f.code for f in findings}


def test_editable_and_wheel_installs_of_optimum_neuron_are_replaced_with_their_option():
    from migrator.engine import migrate_requirements

    url = "git+https://github.com/huggingface/optimum-neuron.git"
    migrated, _ = rewrite_shell(f"pip install torch-xla -e {url} -e .\n")
    assert migrated.startswith('pip install torch-neuronx "transformers>=5.23"') and "optimum" not in migrated
    assert " -e . --extra-index-url https://pip.repos.neuron.amazonaws.com\n" in migrated
    wheel = "https://example.com/optimum_neuron-0.3.0-py3-none-any.whl"
    assert "optimum" not in rewrite_shell(f"pip install {wheel}\n")[0]
    migrated, _ = migrate_requirements(f"-e {url}#egg=optimum-neuron\n-e .\n")
    assert migrated.endswith("accelerate\n-e .\n") and "optimum" not in migrated


def test_bf16_on_a_script_that_parses_a_trl_config_is_given_its_value(tmp_path):
    """TRL 1.16's configs declare `bf16: bool | None`, which HfArgumentParser reads only with a value: a bare
    `--bf16` stops the script ("argument --bf16: expected one argument"); TrainingArguments takes either."""
    from transformers import HfArgumentParser, TrainingArguments
    from trl import SFTConfig

    (tmp_path / "sft_script.py").write_text(
        "from trl import SFTConfig, TrlParser\n\nconfig, = TrlParser([SFTConfig]).parse_args_and_config()\n"
    )
    (tmp_path / "clm.py").write_text(
        "from transformers import HfArgumentParser, TrainingArguments\n\n"
        "args, = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()\n"
    )
    launcher = (
        "export XLA_USE_BF16=1\ntorchrun sft_script.py --output_dir out\npython clm.py --output_dir out\n"
    )
    migrated, _ = migrate_shell(launcher, directory=tmp_path)
    assert (
        "sft_script.py --output_dir out --bf16 true\n" in migrated
        and "clm.py --output_dir out --bf16\n" in migrated
    )
    assert HfArgumentParser(SFTConfig).parse_args(["--output_dir", "out", "--bf16", "true"]).bf16 is True
    assert HfArgumentParser(TrainingArguments).parse_args(["--output_dir", "out", "--bf16"]).bf16 is True


def _launch_of(tmp_path, script: str) -> tuple[str, list]:
    """A launcher passing `--tensor_parallel_size 8` to `script` (the text of train.py beside it), migrated."""
    (tmp_path / "train.py").write_text(script)
    launcher = (
        "#!/bin/bash\ntorchrun --nproc_per_node 8 train.py --output_dir out --tensor_parallel_size 8 --bf16\n"
    )
    return migrate_shell(launcher, directory=tmp_path)


_PARSED_TRN_CONFIG = """\
from optimum.neuron import NeuronHfArgumentParser, NeuronTrainingArguments, NeuronTrainer
from optimum.neuron.models.training import NeuronModelForCausalLM
{dataclass}
parser = NeuronHfArgumentParser({parsed})
{unpacked} = parser.parse_args_into_dataclasses()
model = NeuronModelForCausalLM.from_pretrained({model_id}, training_args.trn_config)
NeuronTrainer(model=model, args=training_args).train()
"""


def test_a_parallel_flag_is_judged_by_the_parser_of_the_migrated_script(tmp_path):
    # The migration adds `tensor_parallel_size` to the script's own dataclass: the launcher's flag still parses.
    declared = _PARSED_TRN_CONFIG.format(
        dataclass="from dataclasses import dataclass\n\n\n@dataclass\nclass ScriptArguments:\n    model_id: str = 'x'\n\n",
        parsed="(ScriptArguments, NeuronTrainingArguments)",
        unpacked="script_args, training_args",
        model_id="script_args.model_id",
    )
    migrated, findings = _launch_of(tmp_path, declared)
    assert "--tensor_parallel_size 8" in migrated and "NM463" not in {f.code for f in findings}
    # No dataclass of its own: the migrated parser, HfArgumentParser(TrainingArguments), would stop at the flag.
    # A launcher with no other legacy code is read for it, and the flag goes with a TODO that keeps its degree.
    undeclared = _PARSED_TRN_CONFIG.format(
        dataclass="", parsed="NeuronTrainingArguments", unpacked="(training_args,)", model_id="'x'"
    )
    migrated, findings = _launch_of(tmp_path, undeclared)
    assert "--tensor_parallel_size" not in migrated.splitlines()[-1]
    (removed,) = [f for f in findings if f.code == "NM463"]
    assert not removed.fixed and removed.message.startswith(
        "`--tensor_parallel_size 8` removed: `train.py` never reads it (optimum-neuron's trainer did) and its "
        "migrated parser rejects it"
    )


def test_activation_checkpointing_is_turned_off_on_the_launch_of_a_compiled_tensor_parallel_script(tmp_path):
    # optimum-neuron's sft_finetuning_qwen3.sh: its script, migrated, compiles and loads with DistributedConfig;
    # with TP, compile and checkpointing PyTorch's AOT autograd fails at the first step (NM222).
    script = _PARSED_TRN_CONFIG.format(
        dataclass="from dataclasses import dataclass\n\n\n@dataclass\nclass ScriptArguments:\n    model_id: str = 'x'\n\n",
        parsed="(ScriptArguments, NeuronTrainingArguments)",
        unpacked="script_args, training_args",
        model_id="script_args.model_id",
    )
    (tmp_path / "train.py").write_text(script)
    launch = (
        "#!/bin/bash\ntorchrun --nproc_per_node 8 train.py --gradient_checkpointing {on} {tp}--bf16 true\n"
    )
    migrated, findings = migrate_shell(
        launch.format(on="true", tp="--tensor_parallel_size $TP "), directory=tmp_path
    )
    assert "--gradient_checkpointing false --tensor_parallel_size $TP" in migrated
    (finding,) = [f for f in findings if f.code == "NM222"]
    assert finding.fixed and "DeviceMesh" in finding.message and "s*b*h*(10 + 24/t)" in finding.message
    assert migrate_shell(migrated, directory=tmp_path)[0] == migrated  # a rerun leaves it
    # Without a TP degree on the launch the model is not tensor-parallel: checkpointing stays.
    migrated, findings = migrate_shell(launch.format(on="true", tp=""), directory=tmp_path)
    assert "--gradient_checkpointing true" in migrated and "NM222" not in {f.code for f in findings}


def test_a_removed_optim_value_on_a_launch_becomes_its_replacement(tmp_path):
    """`--optim adamw_hf` makes Transformers 5's TrainingArguments raise; the script's own `--optim` stays."""
    from transformers import HfArgumentParser, TrainingArguments

    (tmp_path / "train_hf.py").write_text(
        "from transformers import HfArgumentParser, TrainingArguments\n"
        "parser = HfArgumentParser(TrainingArguments)\n"
    )
    (tmp_path / "train_own.py").write_text(
        "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--optim')\n"
    )
    script = (
        "export NEURON_RT_NUM_CORES=2\n"
        "torchrun train_hf.py --output_dir out --optim adamw_hf\n"
        "python train_hf.py --optim=adamw_apex_fused --output_dir out\n"
        "python train_own.py --optim adamw_hf\n"
    )
    migrated, findings = rewrite_shell(script, directory=tmp_path)
    assert "torchrun train_hf.py --output_dir out --optim adamw_torch\n" in migrated
    assert "python train_hf.py --optim=adamw_torch_fused --output_dir out\n" in migrated
    assert "python train_own.py --optim adamw_hf\n" in migrated
    assert [f.code for f in findings if f.code == "NM227"] == ["NM227", "NM227"]
    for optim in ("adamw_torch", "adamw_torch_fused"):
        HfArgumentParser(TrainingArguments).parse_args(["--output_dir", "out", "--optim", optim])


def test_an_accelerate_config_that_runs_deepspeed_gets_a_todo_on_its_launch(tmp_path) -> None:
    """NM475: `accelerate launch --config_file F` where F (beside the launcher) sets `distributed_type: DEEPSPEED`
    (a GPU launcher kept in a tree migrated to TorchNeuron); the same launch with an FSDP config is left alone."""
    from migrator.engine import migrate_shell

    (tmp_path / "ds.yaml").write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\n")
    (tmp_path / "fsdp.yaml").write_text("distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n")
    launcher = "#!/bin/bash\naccelerate launch \\\n  --config_file {} \\\n  train.py --bf16\n"
    migrated, findings = migrate_shell(launcher.format("ds.yaml"), directory=tmp_path)
    assert [(f.code, f.fixed) for f in findings if f.code == "NM475"] == [("NM475", False)]
    assert (
        "# TODO(neuron-migrate): NM475 `accelerate launch --config_file ds.yaml` (its `distributed_type` is DEEPSPEED)"
        in migrated
    )
    assert migrate_shell(migrated, directory=tmp_path)[0] == migrated
    _, fsdp = migrate_shell(launcher.format("fsdp.yaml"), directory=tmp_path)
    assert not [f for f in fsdp if f.code == "NM475"]


@pytest.mark.parametrize(("model", "kept"), [("Qwen/Qwen3-0.6B", False), ("$MODEL_ID", True)])
def test_an_export_a_python_file_beside_it_still_loads_stays_with_its_todo(tmp_path, model, kept):
    """A load the exported-load rewrite can make (a literal model id) no longer needs the folder: the export goes.
    One it cannot (the model from a variable) still loads the compiled folder: the export stays, with a TODO
    naming the file."""
    (tmp_path / "infer.py").write_text(
        'from optimum.neuron import NeuronModelForCausalLM\nmodel = NeuronModelForCausalLM.from_pretrained("qwen_neuron")\n'
    )
    script = f"#!/bin/bash\noptimum-cli export neuron --model {model} --batch_size 1 --sequence_length 512 qwen_neuron/\n"
    (tmp_path / "export.sh").write_text(script)
    migrated, findings = migrate_shell(script, directory=tmp_path)
    [finding] = [f for f in findings if f.code == "NM452"]
    assert ("optimum-cli export neuron" in migrated) is kept and finding.fixed is not kept
    if kept:
        assert "which `infer.py` beside this script loads" in finding.message
