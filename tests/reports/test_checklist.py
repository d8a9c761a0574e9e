from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from migrator.engine import FileResult
from migrator.registry import RULES
from migrator.rules import Finding, Rule, Severity
from reports.checklist import build_checklist, write_checklist
from tests.reports.conftest import write_jsonl

EXAMPLES = Path(__file__).resolve().parents[2] / "fixtures" / "examples"

INFERENCE_SCRIPT = """\
from optimum.neuron import NeuronModelForCausalLM
from transformers import AutoTokenizer

MODEL_ID = "Qwen/Qwen3-0.6B"
model = NeuronModelForCausalLM.from_pretrained(MODEL_ID, export=True, instance_type="inf2")
tokenizer = AutoTokenizer.from_pretrained(MODEL_ID)
inputs = tokenizer(["hi"], return_tensors="pt")
model.generate(**inputs)
"""


def fake_analyze(findings_by_name: dict[str, list[Finding]], errors: dict[str, str] | None = None):
    """Stands in for migrator.analyze_paths with chosen findings."""

    def analyze(paths, exclude=()):
        files = []
        for root in paths:
            for path in sorted(Path(root).rglob("*")) if Path(root).is_dir() else [Path(root)]:
                if path.suffix in (".py", ".sh", ".ipynb"):
                    findings = findings_by_name.get(path.name, [])
                    error = (errors or {}).get(path.name)
                    files.append(FileResult(str(path), bool(findings), error, list(findings)))
        return files

    return analyze


def finding(code, line, message, fixed, cell=None, why=None, action=None, subject=None) -> Finding:
    """A finding of the registered rule `code` (its family and severity are the rule's)."""
    return Finding(RULES[code], line, 1, message, fixed, cell, why, action, subject)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "infer.py").write_text(INFERENCE_SCRIPT)
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    return tmp_path


@pytest.fixture
def results(tmp_path, rows):
    return write_jsonl(tmp_path / "results.jsonl", rows["results-sim"])


def test_items_models_and_order(project, results, rows):
    analyze = fake_analyze(
        {
            "infer.py": [
                finding("NM101", 5, "Rewritten to AutoModelForCausalLM.", True),
                finding("NM102", 5, "Rewritten; check the cache size.", True),
                finding(
                    "NM104",
                    5,
                    "instance_type has no equivalent; remove it",
                    False,
                    why="instance_type has no equivalent",
                    action="remove it",
                ),
            ]
        }
    )
    context = build_checklist([project], results, online=False, analyze=analyze)
    (section,) = context["sections"]
    assert section.rewrites == {"inference": 2}
    titles = [item.title for item in context["blocking"]]
    assert titles[0].startswith("Targets inf2")
    # gpt2 (the local config) fails in the results at generate: that blocks the migration.
    gpt2 = next(row for row in rows["results-sim"] if row["model_type"] == "gpt2")
    assert any(gpt2["error"] in title and "fails at generate" in title for title in titles)
    manual = [item for item in section.items if item.severity == "manual"]
    assert [(item.title, item.action, item.location) for item in manual] == [
        ("NM104: instance_type has no equivalent", "remove it", f"{section.display}:5")
    ]
    risks = [
        (item.title.split(" ")[0], item.location) for item in section.items if item.severity == "compile-risk"
    ]
    assert risks == [("NM809:", f"{section.display}:5"), ("NM801:", f"{section.display}:7")]
    models = {row.reference: row for row in context["models"]}
    qwen3 = next(row for row in rows["results-sim"] if row["model_type"] == "qwen3")
    assert models["Qwen/Qwen3-0.6B"].architecture.model_type == "qwen3"
    assert models["Qwen/Qwen3-0.6B"].result["recompile_count"] == qwen3["recompile_count"]
    assert any(
        row.architecture.source.startswith("local") and row.architecture.model_type == "gpt2"
        for row in models.values()
    )
    severities = [item.severity for item in section.items]
    assert severities == sorted(severities, key=["blocking", "manual", "compile-risk", "check"].index)


def test_each_causal_lm_shows_its_real_size_plan_for_what_the_script_does(tmp_path, results, capsys):
    (tmp_path / "infer.py").write_text(INFERENCE_SCRIPT)
    (tmp_path / "train.py").write_text(
        'from trl import SFTTrainer\n\ntrainer = SFTTrainer(model="meta-llama/Llama-3.1-8B")\n'
        'other = SFTTrainer(model="mistralai/Mistral-7B-Instruct-v0.3")\n'
    )
    context = build_checklist([tmp_path], results, online=False, analyze=fake_analyze({}))
    plans = {row.reference: row.plan for row in context["models"]}
    assert plans["Qwen/Qwen3-0.6B"].startswith("generate, bf16, batch 1 x sequence 2048: 0.60B parameters")
    # What `neuron-compat plan meta-llama/Llama-3.1-8B` answers: FSDP over 4 ranks with checkpointing.
    assert plans["meta-llama/Llama-3.1-8B"] == (
        "train, bf16, batch 1 x sequence 2048: 8.03B parameters, TP plan full; fits trn2.48xlarge at tp 1 x "
        "fsdp 4, activation checkpointing (17.7 GiB of 24.0 GiB per rank): DistributedConfig(tp_size=1, "
        "fsdp_size=4)"
    )
    assert plans["mistralai/Mistral-7B-Instruct-v0.3"].startswith("no real-size plan (`neuron-compat plan`)")
    assert "--config PATH" in plans["mistralai/Mistral-7B-Instruct-v0.3"]
    assert write_checklist([tmp_path], None, results, online=False, analyze=fake_analyze({})) == 0
    out = capsys.readouterr().out
    assert "Real-size plans" in out and "- `meta-llama/Llama-3.1-8B`: train, bf16" in out


def test_markdown_is_a_task_list_with_blocking_first(project, results, tmp_path, capsys):
    output = tmp_path / "out" / "checklist.md"
    analyze = fake_analyze({"infer.py": [finding("NM901", 1, "no rewrite rule; do it", False)]})
    assert write_checklist([project], output, results, False, analyze=analyze) == 0
    assert str(output.resolve()) in capsys.readouterr().out
    text = output.read_text()
    tasks = re.findall(r"^- \[ \] \*\*([a-z -]+):\*\*", text, flags=re.MULTILINE)
    assert tasks and tasks[0] == "blocking"
    first_other = next(index for index, severity in enumerate(tasks) if severity != "blocking")
    assert set(tasks[:first_other]) == {"blocking"}
    assert "blocking" not in tasks[first_other:]
    assert "## Target platform" in text and "Install TRL" not in text  # the files do not use TRL


def test_notebook_cells_and_file_errors(tmp_path, results):
    (tmp_path / "nb.ipynb").write_text(
        json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    )
    (tmp_path / "broken.py").write_text("def f(:\n")
    analyze = fake_analyze(
        {"nb.ipynb": [finding("NM102", 2, "why; what", False, cell=4)]},
        errors={"broken.py": "line 1: invalid syntax"},
    )
    context = build_checklist([tmp_path], results, online=False, analyze=analyze)
    locations = [item.location for section in context["sections"] for item in section.items]
    assert any(location.endswith("nb.ipynb (cell 4, line 2)") for location in locations)
    assert any(
        "cannot process this file: line 1: invalid syntax" in item.title for item in context["blocking"]
    )


def test_a_long_checklist_says_what_it_reads(tmp_path, capsys):
    """A project of many files shows progress on standard error while the migrator reads them."""
    for number in range(20):
        (tmp_path / f"step_{number}.py").write_text("import torch\n")
    assert write_checklist([tmp_path], tmp_path / "checklist.md", None, False) == 0
    assert "reading 20 files" in capsys.readouterr().err


def test_real_migrator_on_the_bundled_examples(tmp_path, rows, results):
    output = tmp_path / "checklist.html"
    assert write_checklist([EXAMPLES], output, results, False) == 0
    html = output.read_text()
    assert "Targets inf2" in html and "Targets trn1.32xlarge" in html
    context = build_checklist([EXAMPLES], results, online=False)
    assert len(context["sections"]) == 5
    references = {row.reference: row.architecture.model_type for row in context["models"]}
    assert references["Qwen/Qwen3-0.6B"] == "qwen3"
    assert references["meta-llama/Llama-3.2-1B"] == "llama"
    assert "mistral" in references.values()  # checkpoints/tiny-mistral/config.json
    assert context["total_rewrites"] > 0


@pytest.mark.parametrize("bad", ["missing-dir", "out.pdf", "unwritable"])
def test_bad_input_exits_2(project, results, tmp_path, capsys, bad):
    paths, output = [project], tmp_path / "checklist.md"
    if bad == "missing-dir":
        paths = [tmp_path / "missing-dir"]
    elif bad == "out.pdf":
        output = tmp_path / "out.pdf"
    else:
        (tmp_path / "file").write_text("x")
        output = tmp_path / "file" / "checklist.md"
    assert write_checklist(paths, output, results, False, analyze=fake_analyze({})) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_corrupt_results_exit_2(project, tmp_path, capsys):
    corrupt = tmp_path / "bad.jsonl"
    corrupt.write_text("{oops\n")
    assert write_checklist([project], None, corrupt, False, analyze=fake_analyze({})) == 2
    assert "bad.jsonl:1" in capsys.readouterr().err


def test_stdout_when_no_output(project, results, capsys):
    assert write_checklist([project], None, results, False, analyze=fake_analyze({})) == 0
    assert capsys.readouterr().out.startswith("# Pre-migration checklist")


def test_risks_the_migrator_rewrites_become_checks(project, results):
    message = 'Added `os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")` after the imports.'
    analyze = fake_analyze({"infer.py": [finding("NM404", 5, message, True)]})
    (section,) = build_checklist([project], results, online=False, analyze=analyze)["sections"]
    (async_item,) = [item for item in section.items if item.title.startswith("NM809:")]
    assert async_item.severity == "check" and message in async_item.action
    assert section.rewrites == {"environment": 1}


def test_fixed_leftover_rewrites_count_as_rewrites(results):
    """A fixed NM5xx finding (a command in an f-string rewritten) is one of the rewrites neuron-migrate does:
    the checklist counts every family the rules have, leftovers included."""
    fixture = EXAMPLES.parent / "migrator" / "leftovers" / "launcher_fstring_precompile.py"
    fixed = [
        line.split()[1]
        for line in fixture.with_suffix(".findings").read_text().splitlines()
        if "fixed" in line
    ]
    assert fixed == ["NM503"]
    (section,) = build_checklist([fixture], results, online=False)["sections"]
    assert section.rewrites == {"leftovers": 1}


def _keys(context) -> dict[str, str]:
    """title -> data-key of every item of a checklist."""
    items = context["blocking"] + context["model_items"] + context["platform_items"]
    items += [item for section in context["sections"] for item in section.items]
    return {item.title: item.stable_key for item in items}


def test_ticks_are_keyed_by_code_file_line_text_and_message(tmp_path, results):
    script = tmp_path / "infer.py"
    script.write_text(INFERENCE_SCRIPT)
    manual = "instance_type has no equivalent; remove it"
    why = "instance_type has no equivalent"
    before = build_checklist(
        [tmp_path],
        results,
        online=False,
        analyze=fake_analyze({"infer.py": [finding("NM104", 5, manual, False, why=why, action="remove it")]}),
    )
    # The file changes above the finding: its line moves, its text and message do not.
    script.write_text("# a new first line\n" + INFERENCE_SCRIPT)
    after = build_checklist(
        [tmp_path],
        results,
        online=False,
        analyze=fake_analyze({"infer.py": [finding("NM104", 6, manual, False, why=why, action="remove it")]}),
    )
    keys_before, keys_after = _keys(before), _keys(after)
    assert keys_before == keys_after
    assert len(set(keys_before.values())) == len(keys_before)  # no two items share a key
    (item,) = [item for item in after["sections"][0].items if item.code == "NM104"]
    assert item.location == "infer.py:6" and item.line_text.startswith("model = NeuronModelForCausalLM")
    # Another line under the same rule is another item: its tick does not carry over.
    script.write_text(INFERENCE_SCRIPT.replace('instance_type="inf2"', 'instance_type="inf2", num_cores=2'))
    changed = build_checklist(
        [tmp_path],
        results,
        online=False,
        analyze=fake_analyze({"infer.py": [finding("NM104", 5, manual, False, why=why, action="remove it")]}),
    )
    assert (
        _keys(changed)["NM104: instance_type has no equivalent"]
        != keys_before["NM104: instance_type has no equivalent"]
    )


def test_paths_are_relative_to_the_scanned_root(project, results, monkeypatch, tmp_path):
    monkeypatch.chdir("/")
    context = build_checklist([project.resolve()], results, online=False, analyze=fake_analyze({}))
    (section,) = context["sections"]
    assert section.display == "infer.py"
    locations = [location for row in context["models"] for location in row.locations]
    assert locations and all(not location.startswith("/") for location in locations)
    local = next(row for row in context["models"] if row.architecture.source.startswith("local"))
    assert local.architecture.source == "local ckpt/config.json" and local.reference == "ckpt"
    item_locations = [item.location for item in context["blocking"] + section.items if item.location]
    assert item_locations and all(location.startswith(("infer.py", "ckpt")) for location in item_locations)


def test_findings_link_their_rule_and_models_their_report_row(project, results, tmp_path):
    output = tmp_path / "out" / "checklist.html"
    output.parent.mkdir()
    (output.parent / "compat.html").write_text("<!doctype html>")
    analyze = fake_analyze(
        {
            "infer.py": [
                finding("NM901", 5, "why; what", False),
                # A rule the registry does not hold (a plug-in's, say): docs/reference/rules.md has no entry for it.
                Finding(Rule("NM999", Severity.WARNING, "unregistered", "what"), 6, 1, "why; what", False),
            ]
        }
    )
    assert write_checklist([project], output, results, False, analyze=analyze) == 0
    html = output.read_text()
    hrefs = re.findall(r'class="rule-link" href="([^"]+)"', html)
    anchors = {href.split("#")[1] for href in hrefs}
    assert "nm901" in anchors and "nm999" not in anchors  # a code the rules doc lacks gets no dead link
    rules = (output.parent / hrefs[0].split("#")[0]).resolve()
    assert rules.name == "rules.md"
    assert all(f'<a id="{anchor}"></a>' in rules.read_text() for anchor in anchors)
    assert '<a href="compat.html#arch-qwen3">qwen3</a>' in html
    # Without the report beside it, no link that would lead nowhere.
    (output.parent / "compat.html").unlink()
    assert write_checklist([project], output, results, False, analyze=analyze) == 0
    assert "compat.html#" not in output.read_text()


NON_CAUSAL_SCRIPT = """\
from diffusers import DiffusionPipeline
from sentence_transformers import SentenceTransformer
from transformers import AutoModelForSequenceClassification, pipeline

EMBEDDER = "Qwen/Qwen3-Embedding-8B"
embedder = SentenceTransformer(EMBEDDER)
classifier = AutoModelForSequenceClassification.from_pretrained("meta-llama/Llama-3.2-1B")
extractor = pipeline("feature-extraction", model="Qwen/Qwen3-0.6B")
images = DiffusionPipeline.from_pretrained("stabilityai/stable-diffusion-xl-base-1.0")
"""


def test_embedding_classification_and_diffusion_models_get_no_causal_lm_verdict(tmp_path, results):
    (tmp_path / "serve.py").write_text(NON_CAUSAL_SCRIPT)
    context = build_checklist([tmp_path], results, online=False, analyze=fake_analyze({}))
    models = {row.reference: row for row in context["models"]}
    assert {reference: row.task for reference, row in models.items()} == {
        "Qwen/Qwen3-Embedding-8B": "embedding",
        "meta-llama/Llama-3.2-1B": "classification",  # a causal-LM checkpoint loaded with a classifier head
        "Qwen/Qwen3-0.6B": "embedding",
        "stabilityai/stable-diffusion-xl-base-1.0": "diffusion",
    }
    assert all(row.result is None for row in models.values())
    items = {item.title: item.action for item in context["model_items"]}
    embedding = items[
        "`Qwen/Qwen3-Embedding-8B` is an embedding model: the causal-LM compatibility matrix does not apply"
    ]
    assert "embedding (feature-extraction) matrix" in embedding
    assert any("diffusion matrix" in action for action in items.values())
    assert not any(item.title.startswith("`Qwen/Qwen3-Embedding-8B` (qwen3)") for item in context["blocking"])


def test_a_risk_is_handled_only_by_the_codes_and_subject_its_rule_names(tmp_path, results):
    (tmp_path / "sft.py").write_text('config = SFTConfig(output_dir="out", padding_free=True)\n')
    other = finding("NM203", 1, "`overwrite_output_dir` removed.", True, subject="x")
    dropped = finding("NM203", 1, "`padding_free` removed.", True, subject="padding_free")
    for findings, severity in (([other], "compile-risk"), ([other, dropped], "check")):
        analyze = fake_analyze({"sft.py": findings})
        (section,) = build_checklist([tmp_path], results, online=False, analyze=analyze)["sections"]
        (risk,) = [item for item in section.items if item.title.startswith("NM803:")]
        assert risk.severity == severity


def test_slurm_jobs_and_shebang_launchers_are_scanned_as_shell(tmp_path, results):
    """The file kinds are the migrator's: .sbatch / .slurm and a suffix-less `#!/bin/bash` script are shell."""
    job = "#!/bin/bash\n#SBATCH --nodes=1\nsrun python train.py --model_name_or_path {model} --bf16\n"
    (tmp_path / "train.sbatch").write_text(job.format(model="Qwen/Qwen3-0.6B"))
    (tmp_path / "finetune.slurm").write_text(job.format(model="meta-llama/Llama-3.2-1B"))
    launcher = tmp_path / "launch"
    launcher.write_text(job.format(model="mistralai/Mistral-7B-v0.1"))
    context = build_checklist([tmp_path, launcher], results, online=False)
    kinds = {Path(section.display).name: section.kind for section in context["sections"]}
    assert kinds == {"train.sbatch": "shell", "finetune.slurm": "shell", "launch": "shell"}, kinds
    references = {row.reference: row.architecture.model_type for row in context["models"]}
    assert references["Qwen/Qwen3-0.6B"] == "qwen3"
    assert references["meta-llama/Llama-3.2-1B"] == "llama"
    assert references["mistralai/Mistral-7B-v0.1"] == "mistral"


def test_a_model_that_recompiles_at_every_decode_step_says_what_happens_on_a_device(tmp_path):
    """With the committed reference run's class-default configs (mistral's `sliding_window=4096`, as the bundled
    tiny-mistral checkpoint has: a guard on the cache length fails at every decode step), the checkpoint gets
    the device consequence, not "one compilation per cache length"."""
    reference = EXAMPLES.parents[1] / "fixtures" / "compat" / "results-neuron-sim.jsonl"
    rows = [json.loads(line) for line in reference.read_text().splitlines() if line.strip()]
    class_defaults = [row for row in rows if row["env"].get("config") == "class-defaults"]
    mistral = next(row for row in class_defaults if row["model_type"] == "mistral")
    assert mistral["recompiles_every_step"] is True
    results = tmp_path / "class-defaults.jsonl"
    results.write_text("".join(json.dumps(row) + "\n" for row in class_defaults))
    output = tmp_path / "checklist.md"
    assert write_checklist([EXAMPLES], output, results, False) == 0
    text = output.read_text()
    assert f"works with caveats: {mistral['recompile_count']} recompile(s) (at every decode step)" in text
    assert "recompile_limit (8)" in text and "one compilation per cache length" not in text


def test_a_local_model_whose_config_differs_from_the_measured_checkpoint_takes_the_class_defaults_row(
    tmp_path, rows
):
    """The first run measured Mistral-7B-Instruct-v0.2's sliding_window=null; a local checkpoint with a window of
    4096 is checked against the class-defaults run beside it (which recompiles at every decode step), and says
    so; one without a window keeps the checkpoint row."""
    base = next(row for row in rows["results-sim"] if row["model_type"] == "mistral")
    checkpoint = dict(
        base, verdict="works", config_source="checkpoint", checkpoint="mistralai/Mistral-7B-Instruct-v0.2",
        checkpoint_values={"sliding_window": None}, env=dict(base["env"], config="checkpoint", settings_id="ck"),
    )  # fmt: skip
    defaults = dict(
        base, verdict="works-with-caveats", recompiles_every_step=True, recompile_count=7, graph_breaks=0,
        config_source="class-defaults", checkpoint=None, checkpoint_values=None,
        env=dict(base["env"], config="class-defaults", settings_id="cd"),
    )  # fmt: skip
    results = write_jsonl(tmp_path / "results.jsonl", [checkpoint, defaults])
    project = tmp_path / "project"
    for name, window in (("windowed", 4096), ("plain", None)):
        (project / name).mkdir(parents=True)
        (project / name / "config.json").write_text(
            json.dumps({"model_type": "mistral", "sliding_window": window})
        )
    context = build_checklist([project], results, online=False, analyze=fake_analyze({}))
    models = {row.reference: row for row in context["models"]}
    assert models["windowed"].result["config_source"] == "class-defaults"
    assert models["plain"].result["config_source"] == "checkpoint"
    (item,) = context["model_items"]
    assert item.title == (
        "`windowed` (mistral) works with caveats: 7 recompile(s) (at every decode step), 0 graph break(s) "
        "(measured with the code-path values of mistralai/Mistral-7B-Instruct-v0.2: sliding_window=null; its "
        "config.json has sliding_window=4096: shown, the row measured with the config class's defaults)"
    )


def _try_report(path: Path, tried: Path, runs: list[dict]) -> Path:
    """A `neuron-migrate try --format json --report` file (the fields the checklist reads)."""
    path.write_text(json.dumps({"path": str(tried), "file": str(tried.resolve()), "steps": 3, "runs": runs}))
    return path


def test_try_reports_show_per_script_what_ran_on_the_stand_in(project, results, tmp_path):
    migrated = tmp_path / "migrated"
    migrated.mkdir()
    ran = {
        "command": "python infer.py",
        "status": "ran",
        "device": "neuron (stand-in on CPU)",
        "steps": 3,
        "loss_finite": True,
        "recompile_count": 3,
        "recompile_reasons": [
            {"line": 41, "cell": None},
            {"line": 12, "cell": None},
            {"line": 41, "cell": None},
        ],
    }
    failed = {"command": "python infer.py --big", "status": "failed", "device": "neuron (stand-in on CPU)",
              "steps": 2, "reason": "ValueError: bad at infer.py:7"}  # fmt: skip
    report = _try_report(tmp_path / "try.json", migrated / "infer.py", [ran, failed])
    output = tmp_path / "out" / "checklist.md"
    assert (
        write_checklist([project], output, results, False, analyze=fake_analyze({}), try_reports=[report])
        == 0
    )
    text = output.read_text()
    assert (
        "Tried: `python infer.py` ran 3 steps on the stand-in, loss finite, 3 recompiles at lines 12, 41."
        in text
    )
    assert (
        "Tried: `python infer.py --big` failed on the stand-in after 2 steps: ValueError: bad at infer.py:7."
        in text
    )
    html = tmp_path / "out" / "checklist.html"
    assert (
        write_checklist([project], html, results, False, analyze=fake_analyze({}), try_reports=[report]) == 0
    )
    assert (
        '<p class="tried">Tried: <code>python infer.py</code> ran 3 steps on the stand-in, loss finite, 3 recompiles '
        "at lines 12, 41.</p>" in html.read_text()
    )


def test_a_try_report_that_is_not_one_exits_2(project, results, tmp_path, capsys):
    bad = tmp_path / "try.json"
    bad.write_text('{"runs": "nope"')
    assert write_checklist([project], None, results, False, analyze=fake_analyze({}), try_reports=[bad]) == 2
    assert "not a neuron-migrate try or bench report" in capsys.readouterr().err


def test_a_notebook_it_cannot_read_is_blocking_never_clean(tmp_path, results):
    """An nbformat-3 notebook full of torch_xla code was called clean."""
    from tests.migrator.test_engine import NBFORMAT_3

    (tmp_path / "old.ipynb").write_text(json.dumps(NBFORMAT_3))
    (tmp_path / "list.ipynb").write_text("[1, 2]")
    context = build_checklist([tmp_path], results, online=False)
    titles = [item.title for item in context["blocking"]]
    assert any(
        "old.ipynb" in item.location and "a version 3 notebook" in item.title for item in context["blocking"]
    )
    assert any("not a valid notebook: the JSON is a list" in title for title in titles)


def test_code_too_deep_for_the_scan_is_still_listed(tmp_path, results):
    """What Python's parser takes but a recursive walk of its tree cannot is reported, not a traceback."""
    (tmp_path / "deep.py").write_text("import torch_xla\nx = " + "-" * 3000 + "1\n")
    context = build_checklist([tmp_path], results, online=False)
    assert [section.display for section in context["sections"]] == ["deep.py"]


def test_bench_reports_show_per_script_what_was_measured(project, results, tmp_path):
    measured = {
        "command": "python infer.py",
        "status": "measured",
        "device": "neuron",
        "steps": {"median_seconds": 0.0412, "tokens_per_s": 3100.4},
        "generation": [],
        "peak_memory": {"bytes": 12 * 2**30, "of": "neuron allocated"},
        "compile": {"recompiles": [{"in": "step 7"}]},
    }
    report = tmp_path / "bench.json"
    report.write_text(json.dumps({"path": str(tmp_path / "infer.py"), "results": [measured]}))
    output = tmp_path / "checklist.md"
    assert (
        write_checklist([project], output, results, False, analyze=fake_analyze({}), try_reports=[report])
        == 0
    )
    assert (
        "Tried: `python infer.py` measured on neuron: median step 41.2 ms, 3,100 tokens/s, peak 12.00 GiB, "
        "1 recompiles." in output.read_text()
    )


def test_the_checklist_reads_the_statuses_a_try_writes() -> None:
    """reports may not import try_run (tests/test_layout.py): its copy of the statuses is checked here."""
    from reports import tries
    from try_run import report

    assert (tries.RAN, tries.FAILED) == (report.RAN, report.FAILED)
