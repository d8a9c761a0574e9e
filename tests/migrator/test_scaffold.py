"""The contributor tools: `scripts/new_rule.py` scaffolds a rule of every kind that the registry loads, and
`tests/migrator/update_fixtures.py` rewrites nothing where the expectations match the output."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.migrator.test_fixtures import FIXTURES
from tests.migrator.update_fixtures import update

REPO = Path(__file__).resolve().parents[2]
NEW_RULE = [sys.executable, str(REPO / "scripts" / "new_rule.py")]
# Where each kind's scaffold goes (its next free code: after the highest module of the kind in its family),
# and what a contributor writes in place of its TODO texts: a real rule, whose example test must then pass.
SCAFFOLDS = {
    "xla": (
        "migrator/families/xla",
        {
            '"TODO: a string every statement the rule acts on holds"': '"set_replication"',
            '"TODO: the qualified name of each call leave_Call decides on"': '"torch_xla.core.xla_model.set_replication"',
            "        self.ctx.report(original, MY_CHECK)\n        return updated": (
                "        self.ctx.report(original, MY_CHECK)\n"
                '        self.ctx.add_import("torch.distributed")\n'
                '        return cst.parse_expression("torch.distributed.barrier()")'
            ),
            "TODO: the smallest realistic file that triggers the rule, as a user writes it\n": (
                "import torch_xla.core.xla_model as xm\n\nxm.set_replication(1)\n"
            ),
            "TODO: the same file once migrated (after=None: reported, left byte-identical)\n": (
                "import torch.distributed\n\ntorch.distributed.barrier()\n"
            ),
        },
    ),
    "shell": (
        "migrator/shell",
        {
            '"TODO: the program whose commands the rule decides"': '"neuron-tool"',
            "self.report(ctx.at(words[0].start), MY_CHECK)": 'self.todo(ctx, node, MY_CHECK, "neuron-tool is gone")',
            "TODO: the smallest realistic launcher that triggers the rule, as a user writes it": "neuron-tool run",
            "TODO: the same launcher once migrated (None: reported, left byte-identical)": (
                "# TODO(neuron-migrate): {code} neuron-tool is gone\\nneuron-tool run"
            ),
        },
    ),
    "risk": (
        "migrator/risks",
        {
            '"TODO: the call that carries the risk"': '"my_call"',
            "TODO: the smallest realistic file that has the risk": "my_call()",
        },
    ),
    "notebook": (
        "migrator/notebook_rules",
        {
            '"TODO: the file whose `%%writefile` cell the rule decides"': '"my.cfg"',
            "TODO: the cell that triggers the rule": "%%writefile my.cfg\\nlevel = 1",
            'example("TODO: the same cell once migrated").before': "None",
        },
    ),
}


def test_a_scaffolded_rule_of_every_kind_is_found_by_the_registry_and_passes_its_example(
    tmp_path: Path,
) -> None:
    """In a copy of the package (~10 s: fresh interpreters import the registry and run the examples)."""
    shutil.copytree(REPO / "migrator", tmp_path / "migrator", ignore=shutil.ignore_patterns("__pycache__"))
    for test in ("test_rule_examples.py", "test_risk_rules.py"):
        shutil.copy(REPO / "tests" / "migrator" / test, tmp_path / test)
    new_rule = [*NEW_RULE, "--root", str(tmp_path)]
    homes = {}
    for where, (package, filled) in SCAFFOLDS.items():
        done = subprocess.run([*new_rule, where, "my_check"], capture_output=True, text=True, check=True)
        code = done.stdout.split("(", 1)[1].split(")", 1)[0]
        highest = max(int(path.name[2:5]) for path in (REPO / package).glob("nm*.py"))
        assert int(code[2:]) > highest, (where, code)
        module = tmp_path / package / f"{code.lower()}_my_check.py"
        assert module.exists(), done.stdout
        text = module.read_text()
        for todo, real in filled.items():
            assert todo in text, (where, todo)
            text = text.replace(todo, real.format(code=code))
        module.write_text(text)
        homes[code] = f"{package.replace('/', '.')}.{code.lower()}_my_check"
    # Found by its name: the registry, which lists no module, is not edited.
    assert (tmp_path / "migrator" / "registry.py").read_text() == (
        REPO / "migrator" / "registry.py"
    ).read_text()
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json; from migrator.registry import RULE_MODULES; print(json.dumps(RULE_MODULES))",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert {
        code: home for code, home in json.loads(loaded.stdout).items() if home.endswith("_my_check")
    } == homes
    # Each scaffold's own example test, in the copy: it passes once its TODOs are replaced as above.
    examples = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", "test_rule_examples.py"]
        + ["test_risk_rules.py", "-k", " or ".join(homes)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    results = {
        line.split("[")[-1].split("-")[0]: line.split()[0]
        for line in examples.stdout.splitlines()
        if "::" in line
    }
    assert results == {code: "PASSED" for code in homes}, examples.stdout
    again = subprocess.run(
        [*new_rule, "xla", "other", "--code", next(iter(homes))], capture_output=True, text=True
    )
    assert again.returncode == 2 and "is already defined" in again.stderr


@pytest.mark.parametrize("case", ["xla/bench_step_sync_helper.py", "shell/crlf_launcher.sh"])
def test_updating_expectations_that_match_the_output_writes_nothing(case: str, tmp_path: Path) -> None:
    assert update(FIXTURES / case, tmp_path) is None
