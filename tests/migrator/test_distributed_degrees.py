"""Parallel degrees the migration moves from optimum-neuron's training arguments to the model load's
DistributedConfig: a value read where the arguments are built means the same at a load before them only when
nothing can change it in between (NM202, NM208)."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_python

EARLIER_LOAD = """\
import argparse
from optimum.neuron import NeuronTrainer, NeuronTrainingArguments
from transformers import AutoModelForCausalLM

parser = argparse.ArgumentParser()
parser.add_argument("--tensor_parallel_size", type=int, default=2)
args = parser.parse_args()
model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B")
{between}training_args = NeuronTrainingArguments(output_dir="o", tensor_parallel_size={degree}, zero_1=False)
NeuronTrainer(model=model, args=training_args).train()
"""


def test_a_degree_read_from_argparse_before_the_load_reaches_that_load():
    # argparse's namespace, bound before the load and never again: the value at the load is the one given here
    migrated, findings = migrate_python(EARLIER_LOAD.format(between="", degree="args.tensor_parallel_size"))
    assert "optimum" not in migrated and not [f for f in findings if not f.fixed]
    assert (
        'from_pretrained("Qwen/Qwen3-0.6B", distributed_config=DistributedConfig(tp_size=args.tensor_parallel_size'
        in migrated
    )


@pytest.mark.parametrize(
    ("between", "degree"),
    [
        ("args.tensor_parallel_size = 4\n", "args.tensor_parallel_size"),  # set after the load
        ("tp = args.tensor_parallel_size\n", "tp"),  # bound after the load
    ],
)
def test_a_degree_that_may_change_after_the_load_keeps_the_todo(between, degree):
    migrated, findings = migrate_python(EARLIER_LOAD.format(between=between, degree=degree))
    assert "NM208" in [f.code for f in findings if not f.fixed] and "NeuronTrainingArguments(" in migrated
